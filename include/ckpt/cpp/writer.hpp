// SPDX-License-Identifier: Apache-2.0
/* ckpt/cpp/writer.hpp — ckpt::Writer (pytorch-pfn-extras' writers) and ckpt::Sink, the file a save function writes.
 * Part of the C++ binding: include <ckpt/ckpt.hpp>, which includes every part. */
#ifndef CKPT_CPP_WRITER_HPP
#define CKPT_CPP_WRITER_HPP

#include <ckpt/cpp/error.hpp>
#include <ckpt/cpp/options.hpp>
#include <ckpt/cpp/storage.hpp>
#include <ckpt/cpp/vars.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace ckpt {

// --------------------------------------------------------------------------------------------------------- writers

// CKPT_WRITER_*: pytorch-pfn-extras' Simple, Thread and Queue writers.
enum class WriterKind : uint32_t {
    simple = CKPT_WRITER_SIMPLE,  // saves run in the caller's thread
    thread = CKPT_WRITER_THREAD,  // one background save at a time: a save first waits for the previous one
    queue = CKPT_WRITER_QUEUE,    // one background thread behind a queue of queue_depth saves
};

// ckpt_writer_options.
struct WriterOptions {
    WriterKind kind = WriterKind::simple;
    uint32_t queue_depth = 0;           // queue: saves queued or running before a save blocks; 0 = 1
    std::shared_ptr<Storage> storage;   // null = the local filesystem
    std::optional<std::string> out_dir; // directory of saves that name none; nullopt = "."
    // Called with the path saved to (<out_dir>/<filename>) after each save that succeeded, once its file is durable
    // under its name (ckpt_after_save_fn): in the saving call for simple writers, on the writer's thread otherwise,
    // before wait() returns. What it throws fails that save (the file stays): "<path>: the after_save callback
    // failed: <what()>", with the exception's code, thrown like the save's own error. The writer keeps a copy. It
    // must not call the writer's own functions. Empty = none (initialized, so that braced options written before
    // it existed still compile warning-free).
    std::function<void(const std::string& path)> after_save = nullptr;
};

// Per save: where it goes and how.
struct SaveOptions {
    std::optional<std::string> out_dir;  // nullopt = the writer's
    bool append = false;  // Writer::save: append to the file in place — not atomic (CKPT_WRITER_APPEND)
    bool no_copy =
        false;  // Writer::save_vars: no snapshot; the data stays unchanged until wait() (CKPT_WRITER_NO_COPY)
};

// The file a save function writes into (a ckpt_sink), valid during the call.
class Sink {
public:
    explicit Sink(ckpt_sink* sink) noexcept : sink_(sink) {}
    // Appends size bytes. Throws Error (CKPT_EIO when the storage failed; every later write fails the same way,
    // and the save fails with that error whatever the function does).
    void write(const void* data, size_t size) {
        const int rc = ckpt_sink_write(sink_, data, size);
        if (rc == CKPT_OK) return;
        failed_ = true;
        detail::throw_error(rc);
    }
    void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
    // The bytes of a contiguous range of trivially copyable values (not of characters: those go as string_view).
    template <typename C,
              typename E = std::remove_cv_t<std::remove_pointer_t<decltype(std::data(std::declval<const C&>()))>>,
              typename = std::enable_if_t<std::is_trivially_copyable_v<E> && !detail::is_character_v<E>>>
    void write(const C& values) {
        write(static_cast<const void*>(std::data(values)), std::size(values) * sizeof(E));
    }
    // Whether a write failed: the save's error is then that write's, whatever the function does after.
    bool failed() const noexcept { return failed_; }
    ckpt_sink* native() const noexcept { return sink_; }

private:
    ckpt_sink* sink_;
    bool failed_ = false;
};

namespace detail {

// One background save's payload, kept by its Writer until the save is known to be over.
struct InFlight {
    virtual ~InFlight() = default;
};

template <typename F>
struct SaveCall final : InFlight {
    F fn;
    explicit SaveCall(F f) : fn(std::forward<F>(f)) {}

    // What the function throws becomes the save's code and, through ckpt_error_set_message on the thread the save
    // runs on, its message: "<path>: the save function failed: <what()>", reported by whichever call reports the
    // save's failure.
    static int run(ckpt_sink* sink, void* payload) noexcept {
        auto* call = static_cast<SaveCall*>(payload);
        Sink s(sink);
        try {
            call->fn(s);
            return CKPT_OK;
        } catch (...) {
            const Thrown thrown = current_exception(CKPT_ERROR);
            // After a failed write the save's error is the write's (ckpt reports it), not this one.
            if (!s.failed()) ckpt_error_set_message(thrown.text);
            return thrown.code;
        }
    }
};

// The writer's after_save function, called by ckpt_writer_options.after_save; nothing crosses into C.
using AfterSave = std::function<void(const std::string&)>;
inline int after_save_call(const char* path, void* payload) noexcept {
    try {
        (*static_cast<const AfterSave*>(payload))(path);
        return CKPT_OK;
    } catch (...) {
        return current_exception_code(CKPT_ERROR);
    }
}

struct VarsSave final : InFlight {
    NpzCallbacks callbacks;
    explicit VarsSave(const Options& o) : callbacks(o) {}
};

}  // namespace detail

// A ckpt_writer: saves files atomically and durably, in the caller's thread (simple) or in the background. Errors of
// background saves are never lost: each is thrown exactly once, by the next save, save_vars, wait or finalize
// (saying what a save function or storage method threw, when one threw).
class Writer {
public:
    explicit Writer(const WriterOptions& options = {})
        : kind_(options.kind),
          depth_(options.kind == WriterKind::queue && options.queue_depth > 0 ? options.queue_depth : 1),
          storage_(options.storage),
          after_save_(options.after_save ? std::make_unique<detail::AfterSave>(options.after_save) : nullptr) {
        ckpt_writer_options c;
        detail::check(ckpt_writer_options_init(&c, CKPT_WRITER_OPTIONS_VERSION));
        detail::StorageRef storage(options.storage);
        c.kind = static_cast<uint32_t>(options.kind);
        c.queue_depth = options.queue_depth;
        c.storage = storage.get();
        c.out_dir = options.out_dir ? options.out_dir->c_str() : nullptr;
        if (after_save_) {
            c.after_save = &detail::after_save_call;
            c.after_save_payload = after_save_.get();  // on the heap: it stays put when the Writer moves
        }
        detail::check(ckpt_writer_new(&w_, &c));
    }
    // Finalizes, dropping errors not yet reported (call finalize() to see them).
    ~Writer() { ckpt_writer_free(w_); }
    Writer(Writer&& other) noexcept
        : w_(std::exchange(other.w_, nullptr)),
          kind_(other.kind_),
          depth_(other.depth_),
          storage_(std::move(other.storage_)),
          after_save_(std::move(other.after_save_)),
          in_flight_(std::move(other.in_flight_)) {}
    Writer& operator=(Writer&& other) noexcept {
        if (this != &other) {
            ckpt_writer_free(w_);
            w_ = std::exchange(other.w_, nullptr);
            kind_ = other.kind_;
            depth_ = other.depth_;
            storage_ = std::move(other.storage_);
            after_save_ = std::move(other.after_save_);
            in_flight_ = std::move(other.in_flight_);
        }
        return *this;
    }
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    ckpt_writer* native() const noexcept { return w_; }
    explicit operator bool() const noexcept { return w_ != nullptr; }
    WriterKind kind() const noexcept { return kind_; }

    // Saves what fn writes to <out_dir>/<filename>: fn is called as fn(Sink&) once — in this thread for simple
    // writers, later on the writer's thread otherwise (fn is then moved into the writer, so capture by value what
    // training may change). If fn throws, the save fails with the exception's code (an Error's own, CKPT_ENOMEM
    // for std::bad_alloc, CKPT_ERROR otherwise) and the target keeps its previous content; nothing crosses into C.
    // Simple writers throw the save's own error here; background ones throw an earlier save's error (this save is
    // then not started) and block while the queue is full.
    template <typename F>
    void save(const std::string& filename, F&& fn, const SaveOptions& options = {}) {
        static_assert(std::is_invocable_v<std::decay_t<F>&, Sink&>, "a save function is called as fn(ckpt::Sink&)");
        const char* dir = options.out_dir ? options.out_dir->c_str() : nullptr;
        const uint32_t flags =
            (options.append ? CKPT_WRITER_APPEND : 0u) | (options.no_copy ? CKPT_WRITER_NO_COPY : 0u);
        if (kind_ == WriterKind::simple) {
            detail::SaveCall<F&&> call(std::forward<F>(fn));
            detail::check(ckpt_writer_save(w_, dir, filename.c_str(), &detail::SaveCall<F&&>::run, &call, flags));
            return;
        }
        auto call = std::make_shared<detail::SaveCall<std::decay_t<F>>>(std::forward<F>(fn));
        submitted(ckpt_writer_save(w_, dir, filename.c_str(), &detail::SaveCall<std::decay_t<F>>::run, call.get(), flags),
                  call);
    }

    // Saves a collection as .npz (save()'s format and options; the writer's storage is used). Background writers
    // snapshot every array before returning, so training may change them at once — unless options.no_copy.
    void save_vars(const std::string& filename, const Vars& vars, const Options& npz = {},
                   const SaveOptions& options = {}) {
        detail::refuse_npz_storage(npz, storage_, "ckpt::Writer::save_vars");
        const char* dir = options.out_dir ? options.out_dir->c_str() : nullptr;
        const uint32_t flags =
            (options.append ? CKPT_WRITER_APPEND : 0u) | (options.no_copy ? CKPT_WRITER_NO_COPY : 0u);
        auto call = std::make_shared<detail::VarsSave>(npz);
        detail::CNpzOptions c(npz, &call->callbacks, false);
        const int rc = ckpt_writer_save_vars(w_, dir, filename.c_str(), vars.native(), &c.c, flags);
        if (kind_ == WriterKind::simple) {
            detail::check(rc);
            return;
        }
        submitted(rc, call->callbacks.progress ? call : nullptr);
    }

    // Waits for every queued save; throws the first error not yet reported.
    void wait() {
        const int rc = ckpt_writer_wait(w_);
        in_flight_.clear();
        detail::check(rc);
    }
    // Waits, then stops the background thread; later saves throw Error(CKPT_EINVAL). Throws the first unreported
    // error. A second call does nothing.
    void finalize() {
        const int rc = ckpt_writer_finalize(w_);
        in_flight_.clear();
        detail::check(rc);
    }

private:
    // Keeps a queued save's payload for as long as the save may run. Saves run in order on one thread, and when a
    // save call returns at most depth_ saves are queued or running (ckpt.h): every older one is over.
    void submitted(int rc, std::shared_ptr<detail::InFlight> call) {
        if (rc == CKPT_OK) in_flight_.push_back(std::move(call));  // an error means this save was not started
        if (in_flight_.size() > depth_)
            in_flight_.erase(in_flight_.begin(), in_flight_.begin() + static_cast<std::ptrdiff_t>(in_flight_.size() - depth_));
        detail::check(rc);
    }

    ckpt_writer* w_ = nullptr;
    WriterKind kind_;
    size_t depth_;
    std::shared_ptr<Storage> storage_;
    std::unique_ptr<detail::AfterSave> after_save_;  // the library calls it until ckpt_writer_free
    // The last depth_ background saves' payloads, oldest first (a vector: its moves cannot throw, a deque's can).
    std::vector<std::shared_ptr<detail::InFlight>> in_flight_;
};

}  // namespace ckpt

#endif  // CKPT_CPP_WRITER_HPP
