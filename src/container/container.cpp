// SPDX-License-Identifier: Apache-2.0
#include "container/container.hpp"

#include "container/hf_index_container.hpp"
#include "container/hf_save.hpp"
#include "container/npz_container.hpp"
#include "container/safetensors_container.hpp"
#include "core/error.hpp"
#include "safetensors/hf_index.hpp"
#include "safetensors/safetensors_reader.hpp"
#include "safetensors/safetensors_writer.hpp"
#include "storage/head_input.hpp"

namespace ckpt::core {

namespace {

constexpr std::string_view kModelFile = "model.safetensors";  // what a model's folder holds, as transformers names it
// The first bytes of a file read to tell its format: one read that holds the length and header of most safetensors
// files (a model of a thousand tensors has a header of about 100 KB).
constexpr size_t kHeadBytes = size_t{64} << 10;

}  // namespace

const char* format_name(Format f) {
    switch (f) {
        case Format::npz: return "npz";
        case Format::safetensors: return "safetensors";
        case Format::automatic: break;
    }
    return "automatic";
}

std::string_view format_suffix(Format f) { return f == Format::safetensors ? ".safetensors" : ".npz"; }

Format format_for_path(const std::string& path) {
    const std::string name = base_name(path);  // a name that is only the suffix names nothing
    const std::string_view suffix = format_suffix(Format::safetensors);
    return name.size() > suffix.size() && ends_with(name, suffix) ? Format::safetensors : Format::npz;
}

VarCollection Container::read_all() {
    std::vector<Array> arrays;
    std::vector<Job> jobs;
    arrays.reserve(size());
    jobs.reserve(size());
    for (size_t i = 0; i < size(); ++i) {
        const ArrayInfo a = array(i);
        arrays.push_back(Array::allocate(a.dtype, a.itemsize, a.shape, false));
        jobs.push_back({i, arrays.back().data()});
    }
    read_entries(jobs);
    VarCollection vars;
    for (size_t i = 0; i < size(); ++i) vars.add(array(i).name, std::move(arrays[i]));
    vars.metadata() = metadata();
    return vars;
}

std::unique_ptr<Container> open_container(Storage& storage, const std::string& path,
                                          const ContainerReadOptions& options) {
    const auto index = [&](const std::string& index_path,
                           std::unique_ptr<InputFile> index_file = nullptr) -> std::unique_ptr<Container> {
        if (options.format == Format::npz)
            fail(Code::format, "{}: not a npz file (an index of safetensors shards)", path);
        return std::make_unique<HfIndexContainer>(storage, index_path, options, std::move(index_file));
    };
    if (ends_with(path, kIndexSuffix)) return index(path);
    std::unique_ptr<InputFile> file;
    try {
        file = storage.open_read(path);
    } catch (const Error& e) {
        // Not a file (a folder: invalid; an object store's prefix: not found). A model's folder is its checkpoint:
        // its model.safetensors, which transformers reads first, else its index. On an object store a folder is only
        // a prefix, which some servers do not list as one: the files are looked for, not the folder.
        if (e.code() != Code::invalid && e.code() != Code::not_found) throw;
        const std::string single = join_path(path, std::string(kModelFile));
        const std::string index_path = single + std::string(kIndexSuffix);
        std::unique_ptr<InputFile> model, index_file;
        try {
            model = storage.open_read(single);
        } catch (const Error&) {
            try {
                index_file = storage.open_read(index_path);
            } catch (const Error&) {
                // neither: the error of a path that is no file
            }
        }
        if (model) return open_container(std::move(model), single, options);
        if (index_file) return index(index_path, std::move(index_file));
        // No model's folder: the error of a path that is no file, met again so that it is also the last thing a
        // storage's callbacks reported (the bindings add a callback's own words to the error).
        file = storage.open_read(path);
    }
    return open_container(std::move(file), path, options);
}

std::unique_ptr<Container> open_container(std::unique_ptr<InputFile> file, std::string label,
                                          const ContainerReadOptions& options) {
    // The content tells the format; the bytes read for it serve the reader too (most safetensors headers fit).
    auto head = std::make_unique<HeadInput>(std::move(file), kHeadBytes);
    const std::string& start = head->head();
    const size_t n = start.size();
    // A file that is neither (truncated, empty, not a checkpoint) is refused by the reader its name asks for, whose
    // message then says what is wrong with it as that format.
    const bool zip = n >= 2 && start[0] == 'P' && start[1] == 'K';
    const Format found = looks_like_safetensors(start.data(), n) ? Format::safetensors
                         : zip                                   ? Format::npz
                                                                 : format_for_path(label);
    if (options.format != Format::automatic && options.format != found)
        fail(Code::format, "{}: not a {} file (its first bytes are those of a {} file)", label,
             format_name(options.format), format_name(found));
    if (found == Format::safetensors) {
        SafetensorsReadOptions st;
        st.max_tensors = options.npz.max_members;
        st.max_total_bytes = options.npz.max_total_bytes;
        return std::make_unique<SafetensorsContainer>(SafetensorsReader(std::move(head), std::move(label), st),
                                                      options.writable_views, options.npz.progress);
    }
    return std::make_unique<NpzContainer>(NpzReader(std::move(head), std::move(label), options.npz),
                                          options.verify_views, options.writable_views);
}

Format format_of_save(const std::string& path, const ContainerWriteOptions& options) {
    return options.format == Format::automatic ? format_for_path(path) : options.format;
}

void check_save(const std::string& path, Format format, const VarCollection& vars,
                const ContainerWriteOptions& options) {
    if (format != Format::safetensors) {
        if (options.max_shard_bytes > 0)
            fail(Code::invalid, "{}: only safetensors files are saved in shards (Hugging Face's layout)", path);
        return;
    }
    if (options.npz.deflate)
        fail(Code::invalid, "{}: safetensors files are not compressed: save it stored, or as .npz to deflate it", path);
    if (options.npz.layout == Layout::objax)
        fail(Code::invalid, "{}: safetensors files have no objax layout: each array is saved under its name", path);
    if (options.max_shard_bytes > 0 && ends_with(path, kIndexSuffix))
        fail(Code::invalid, "{}: a sharded save is asked for by the single file's name ({}), not the index's", path,
             path.substr(0, path.size() - kIndexSuffix.size()));
    try {
        check_safetensors_types(vars);
    } catch (const Error& e) {
        rethrow_with_context(e, path);
    }
}

uint64_t write_container(OutputFile& out, Format format, const VarCollection& vars,
                         const ContainerWriteOptions& options) {
    if (format != Format::safetensors) return write_npz(out, vars, options.npz);
    SafetensorsWriteOptions st;
    st.progress = options.npz.progress;
    st.before_write = options.npz.before_write;
    st.manager_keys = options.npz.manager_keys;
    st.record = options.safetensors_record;
    st.base = options.safetensors_base;
    st.shared_bytes = options.npz.shared_bytes;
    return write_safetensors(out, vars, st);
}

void save_container(Storage& storage, const std::string& path, const VarCollection& vars,
                    const ContainerWriteOptions& options) {
    const Format format = format_of_save(path, options);
    check_save(path, format, vars, options);
    if (options.max_shard_bytes > 0) {
        save_hf_sharded(storage, path, vars, options);
        return;
    }
    write_atomically(storage, path, [&](OutputFile& out) { write_container(out, format, vars, options); });
}

void restore_container(Container& file, VarCollection& vars, const Renamer& rename, bool partial) {
    vars.check_restorable(file.label());
    for (size_t v = 0; v < vars.size(); ++v) vars.set_restored(v, false);
    const auto stored = [&](size_t i) {
        const ArrayInfo a = file.array(i);
        return StoredArray{a.name, a.dtype, a.itemsize, a.shape};
    };
    const std::vector<std::optional<size_t>> source =
        match_stored(vars, file.size(), stored, RestoreMatch{file.label(), "file", rename, partial});

    std::vector<Container::Job> jobs;
    jobs.reserve(vars.size());
    for (size_t v = 0; v < vars.size(); ++v)
        if (source[v]) jobs.push_back({*source[v], vars.array(v).data()});
    // Copied before the arrays are read, then moved in: running out of memory leaves the metadata as it was
    // (a copy assignment could stop halfway through the keys).
    Metadata metadata = file.metadata();
    file.read_entries(jobs);
    vars.metadata() = std::move(metadata);
    for (size_t v = 0; v < vars.size(); ++v) vars.set_restored(v, source[v].has_value());
}

}  // namespace ckpt::core
