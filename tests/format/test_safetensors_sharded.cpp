// SPDX-License-Identifier: Apache-2.0
// Hugging Face's sharded layout through the C API: saves split as huggingface_hub splits them, an index as
// transformers writes it, the index (or its folder) read as one checkpoint, what an earlier save left cleaned up, and
// indexes that lie — paths out of the folder, missing shards, tensors elsewhere than the index says, shards of two
// saves — refused naming the index and the problem.
#include <catch2/catch.hpp>

#include "support/files.hpp"
#include "support/handles.hpp"
#include "support/safetensors_file.hpp"
#include "support/temp_dir.hpp"

#include <ckpt/ckpt.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using Catch::Matchers::Contains;
using ckpt::testing::new_vars;
using ckpt::testing::open_file;
using ckpt::testing::read_file;
using ckpt::testing::Reader;
using ckpt::testing::safetensors_file;
using ckpt::testing::TempDir;
using ckpt::testing::Vars;
using ckpt::testing::write_file;

namespace {

// Five uint8 arrays of 40, 40, 100, 30 and 10 bytes, each byte its array's number.
Vars five_arrays() {
    Vars vars = new_vars();
    const int64_t sizes[] = {40, 40, 100, 30, 10};
    const char* names[] = {"a", "b", "big", "d", "e"};
    for (int k = 0; k < 5; ++k) {
        const std::vector<uint8_t> bytes(static_cast<size_t>(sizes[k]), static_cast<uint8_t>(k + 1));
        REQUIRE(ckpt_vars_add(vars.get(), names[k], CKPT_UINT8, 1, &sizes[k], bytes.data(), CKPT_COPY) == CKPT_OK);
    }
    REQUIRE(ckpt_vars_set_metadata(vars.get(), "format", "pt") == CKPT_OK);
    return vars;
}

int save_sharded(const std::string& path, const ckpt_vars* vars, uint64_t max_shard_bytes) {
    ckpt_options o = CKPT_OPTIONS_INIT;
    o.max_shard_bytes = max_shard_bytes;
    return ckpt_save(path.c_str(), vars, &o);
}

std::vector<std::string> files_in(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

Vars read_all(const std::string& path) {
    ckpt_vars* out = nullptr;
    const int rc = ckpt_read(&out, path.c_str(), nullptr);
    INFO(ckpt_error_message());
    REQUIRE(rc == CKPT_OK);
    return Vars(out);
}

void require_five(const ckpt_vars* got) {
    REQUIRE(ckpt_vars_count(got) == 5);
    const char* names[] = {"a", "b", "big", "d", "e"};
    const size_t sizes[] = {40, 40, 100, 30, 10};
    for (int k = 0; k < 5; ++k) {
        size_t i = 0;
        REQUIRE(ckpt_vars_find(got, names[k], &i) == CKPT_OK);
        REQUIRE(ckpt_vars_nbytes(got, i) == sizes[k]);
        const auto* p = static_cast<const uint8_t*>(ckpt_vars_data(got, i));
        CHECK(std::all_of(p, p + sizes[k], [&](uint8_t b) { return b == k + 1; }));
    }
}

// An index over `shards` (name -> its tensors' JSON entries) beside them, written by hand.
void write_layout(const std::string& dir, const std::string& weight_map,
                  const std::vector<std::pair<std::string, std::string>>& shards) {
    for (const auto& [name, bytes] : shards) write_file(dir + "/" + name, bytes);
    write_file(dir + "/model.safetensors.index.json",
               "{\"metadata\": {\"total_size\": 8}, \"weight_map\": {" + weight_map + "}}");
}

const std::string kShardA =
    safetensors_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "\x01\x01\x01\x01");
const std::string kShardAC = safetensors_file(
    R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"c":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
    "\x01\x01\x03\x03");
const std::string kShardB =
    safetensors_file(R"({"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "\x02\x02\x02\x02");

}  // namespace

TEST_CASE("a sharded save splits as huggingface_hub does and writes the index transformers writes") {
    TempDir tmp;
    const std::string path = tmp.file("model.safetensors");
    Vars vars = five_arrays();
    INFO(ckpt_error_message());
    REQUIRE(save_sharded(path, vars.get(), 64) == CKPT_OK);
    // a (40) fills shard 1 until b does not fit; big (100 > 64) has a shard of its own, numbered when it comes; d
    // does not fit beside b, e fits beside d.
    CHECK(files_in(tmp.path()) ==
          std::vector<std::string>{"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                   "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors",
                                   "model.safetensors.index.json"});
    const std::string index = read_file(path + ".index.json");
    CHECK_THAT(index, Contains("\"total_size\": 220"));
    CHECK_THAT(index, Contains("\"weight_map\": {\n    \"a\": \"model-00001-of-00004.safetensors\",\n"
                               "    \"b\": \"model-00003-of-00004.safetensors\",\n"
                               "    \"big\": \"model-00002-of-00004.safetensors\",\n"
                               "    \"d\": \"model-00004-of-00004.safetensors\",\n"
                               "    \"e\": \"model-00004-of-00004.safetensors\"\n  }\n}\n"));
    // Every shard carries the metadata ("format": "pt", which transformers requires) and the save's id.
    const std::string shard = read_file(tmp.file("model-00004-of-00004.safetensors"));
    CHECK_THAT(shard, Contains("\"format\":\"pt\"") && Contains("\"ckpt.save_id\":"));

    // Read as one checkpoint, by the index or by the folder.
    for (const std::string& p : {path + ".index.json", tmp.path()}) {
        INFO(p);
        Vars back = read_all(p);
        require_five(back.get());
        CHECK(ckpt_vars_metadata_count(back.get()) == 1);  // the save's id is the layout's, not the checkpoint's
        CHECK(std::string(ckpt_vars_metadata(back.get(), "format")) == "pt");
    }
    Reader npz = open_file(path + ".index.json");
    CHECK(ckpt_reader_format(npz.get()) == CKPT_FORMAT_SAFETENSORS);
    CHECK(ckpt_reader_count(npz.get()) == 5);
    CHECK(ckpt_reader_name(npz.get(), 0) == std::string("a"));  // by shard, then each shard's order
    CHECK(ckpt_reader_name(npz.get(), 1) == std::string("big"));
    size_t i = 0;
    REQUIRE(ckpt_reader_find(npz.get(), "d", &i) == CKPT_OK);
    // Where d lies: its shard, by the member name, and its offset in that file.
    CHECK(ckpt_reader_member_name(npz.get(), i) == std::string("model-00004-of-00004.safetensors"));
    CHECK(read_file(tmp.file("model-00004-of-00004.safetensors"))[ckpt_reader_data_offset(npz.get(), i)] == '\x04');
    const void* view = nullptr;
    REQUIRE(ckpt_reader_map(npz.get(), i, &view) == CKPT_OK);
    CHECK(static_cast<const uint8_t*>(view)[29] == 4);
    uint8_t part[10] = {};
    REQUIRE(ckpt_reader_read_range(npz.get(), i, 20, part, sizeof part) == CKPT_OK);
    CHECK(part[9] == 4);
    uint64_t shards = 0;
    for (const auto& f : files_in(tmp.path()))
        if (f.rfind("model-", 0) == 0) shards += std::filesystem::file_size(tmp.file(f));
    CHECK(ckpt_reader_file_size(npz.get()) == shards);
}

TEST_CASE("a save of the layout removes what an earlier one left and the new one does not use") {
    TempDir tmp;
    const std::string path = tmp.file("model.safetensors");
    Vars vars = five_arrays();
    write_file(tmp.file("config.json"), "{}");                // a model's other files stay
    REQUIRE(save_sharded(path, vars.get(), 64) == CKPT_OK);   // 4 shards
    REQUIRE(save_sharded(path, vars.get(), 150) == CKPT_OK);  // 2 shards: the 4 go
    CHECK(files_in(tmp.path()) == std::vector<std::string>{"config.json", "model-00001-of-00002.safetensors",
                                                           "model-00002-of-00002.safetensors",
                                                           "model.safetensors.index.json"});
    require_five(read_all(tmp.path()).get());
    REQUIRE(save_sharded(path, vars.get(), 1000) == CKPT_OK);  // one file: the index and its shards go
    CHECK(files_in(tmp.path()) == std::vector<std::string>{"config.json", "model.safetensors"});
    require_five(read_all(tmp.path()).get());
    REQUIRE(save_sharded(path, vars.get(), 64) == CKPT_OK);  // sharded again: the single file goes
    const std::vector<std::string> after = files_in(tmp.path());
    CHECK(std::find(after.begin(), after.end(), "model.safetensors") == after.end());
    CHECK(after.size() == 6);  // config.json, 4 shards, the index
    require_five(read_all(tmp.path()).get());
}

TEST_CASE("shards of two saves of one layout are refused, not mixed") {
    TempDir tmp;
    const std::string path = tmp.file("model.safetensors");
    Vars vars = five_arrays();
    REQUIRE(save_sharded(path, vars.get(), 64) == CKPT_OK);
    const std::string first_shard = read_file(tmp.file("model-00001-of-00004.safetensors"));
    REQUIRE(save_sharded(path, vars.get(), 64) == CKPT_OK);
    // As a save killed between its renames leaves it: one shard of the earlier save beside the later index.
    write_file(tmp.file("model-00001-of-00004.safetensors"), first_shard);
    ckpt_vars* out = nullptr;
    CHECK(ckpt_read(&out, (path + ".index.json").c_str(), nullptr) == CKPT_EFORMAT);
    CHECK_THAT(ckpt_error_message(),
               Contains("model-00001-of-00004.safetensors is not of the save this index records"));
}

TEST_CASE("an index that lies or reaches out of its folder is refused naming the index and the problem") {
    struct Case {
        const char* what;
        std::string weight_map;
        int code;
        const char* message;
    };
    const std::vector<Case> cases = {
        {"a parent folder", R"("a": "../a.safetensors")", CKPT_EFORMAT,
         "the shard name '../a.safetensors' is not a file"},
        {"an absolute path", R"("a": "/tmp/a.safetensors")", CKPT_EFORMAT, "slash or backslash"},
        {"a backslash", R"("a": "sub\\a.safetensors")", CKPT_EFORMAT, "slash or backslash"},
        {"a control character", R"("a": "a\u0007.safetensors")", CKPT_EFORMAT, "control character"},
        {"a tensor named twice", R"("a": "a.safetensors", "a": "a.safetensors")", CKPT_EFORMAT, "'a' appears twice"},
        {"a missing shard", R"("a": "a.safetensors", "b": "gone.safetensors")", CKPT_ENOTFOUND,
         "gone.safetensors that holds tensor 'b' is missing"},
        {"a tensor elsewhere", R"("a": "b.safetensors", "b": "b.safetensors")", CKPT_EFORMAT,
         "tensor 'a' is not in the shard"},
        {"a tensor the index does not list", R"("a": "ac.safetensors")", CKPT_EFORMAT,
         "ac.safetensors holds tensor 'c', which the index does not put there"},
        {"a file name that is not a string", R"("a": 5)", CKPT_EFORMAT, "the entry of tensor 'a' is a number"},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        TempDir tmp;
        write_layout(tmp.path(), c.weight_map,
                     {{"a.safetensors", kShardA}, {"b.safetensors", kShardB}, {"ac.safetensors", kShardAC}});
        ckpt_vars* out = nullptr;
        const int rc = ckpt_read(&out, tmp.file("model.safetensors.index.json").c_str(), nullptr);
        ckpt_vars_free(out);
        INFO(ckpt_error_message());
        CHECK(rc == c.code);
        CHECK_THAT(ckpt_error_message(), Contains("model.safetensors.index.json") && Contains(c.message));
    }
    TempDir tmp;
    write_file(tmp.file("model.safetensors.index.json"), "{\"metadata\": {}}");
    ckpt_vars* out = nullptr;
    CHECK(ckpt_read(&out, tmp.file("model.safetensors.index.json").c_str(), nullptr) == CKPT_EFORMAT);
    CHECK_THAT(ckpt_error_message(), Contains("there is no 'weight_map'"));
    CHECK(ckpt_read(&out, tmp.path().c_str(), nullptr) == CKPT_EFORMAT);  // the folder reads its index too
    TempDir empty;
    CHECK(ckpt_read(&out, empty.path().c_str(), nullptr) == CKPT_EINVAL);  // as for any folder that is no model
}

TEST_CASE("the sharded layout is safetensors' and ckpt_save's alone") {
    TempDir tmp;
    Vars vars = five_arrays();
    CHECK(save_sharded(tmp.file("model.npz"), vars.get(), 64) == CKPT_EINVAL);
    CHECK_THAT(ckpt_error_message(), Contains("only safetensors files are saved in shards"));
    CHECK(save_sharded(tmp.file("model.safetensors.index.json"), vars.get(), 64) == CKPT_EINVAL);
    ckpt_options npz = CKPT_OPTIONS_INIT;
    npz.max_shard_bytes = 64;
    ckpt_manager_options m = CKPT_MANAGER_OPTIONS_INIT;
    m.npz = &npz;
    ckpt_manager* manager = nullptr;
    CHECK(ckpt_manager_open(&manager, tmp.file("run").c_str(), &m) == CKPT_EINVAL);
    CHECK_THAT(ckpt_error_message(), Contains("a manager saves one file per checkpoint"));
    CHECK(files_in(tmp.path()).empty());
}
