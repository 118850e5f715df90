// SPDX-License-Identifier: Apache-2.0
#include "writer/writer.hpp"

#include "core/error.hpp"

namespace ckpt::core {

Writer::Writer(Kind kind, size_t queue_depth, std::shared_ptr<Storage> storage)
    : kind_(kind), depth_(kind == Kind::thread || queue_depth == 0 ? 1 : queue_depth), storage_(std::move(storage)) {
    if (kind_ == Kind::simple) return;
    try {
        thread_ = std::thread([this] { worker(); });
    } catch (const std::system_error& e) {
        // Out of threads or of memory for a stack (EAGAIN): say what could not be done, not just strerror.
        fail(Code::error, "cannot start the background writer thread: {}", e.what());
    }
}

Writer::~Writer() {
    try {
        finalize();
    } catch (...) {
        // Documented: errors that nobody asked for by then are dropped.
    }
}

void Writer::run(const Task& task) {
    Storage& storage = task.elsewhere ? *task.elsewhere : *storage_;
    if (task.append) {
        try {
            std::unique_ptr<OutputFile> out = storage.open_append(task.path);
            task.body(*out);
            out->sync();
            out->close();
        } catch (const Error& e) {
            rethrow_naming(e, task.path);  // write_atomically names the path for atomic saves
        }
    } else {
        write_atomically(storage, task.path, task.body);
    }
    if (task.after) task.after();
}

void Writer::throw_unreported(std::unique_lock<std::mutex>& lock, const std::string* not_started) {
    if (unreported_.empty()) return;
    // Taken without allocating, and clear() keeps the capacity the worker relies on (see submit).
    const std::exception_ptr first_error = unreported_.front(), last_error = unreported_.back();
    const size_t more = unreported_.size() - 1;
    unreported_.clear();
    lock.unlock();
    if (more == 0 && not_started == nullptr) std::rethrow_exception(first_error);
    try {
        std::rethrow_exception(first_error);
    } catch (const Error& first) {
        std::string text = first.what();
        // Several saves failed before anyone asked: report the first with its code, and say how many more.
        if (more != 0) {
            std::string last;
            try {
                std::rethrow_exception(last_error);
            } catch (const std::exception& e) {
                last = e.what();
            }
            text = fmt::format("{} (and {} later background save{} failed too; the last: {})", text, more,
                               more == 1 ? "" : "s", last);
        }
        // The call that hears of the failure asked for a save of its own, which must not vanish unnoticed.
        if (not_started != nullptr) text = fmt::format("{}; the save of {} was not started", text, *not_started);
        throw Error(first.code(), text);
    }
}

void Writer::submit(const std::string& path, Body body, bool append, std::function<void()> after,
                    std::shared_ptr<Storage> elsewhere) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (finalized_) fail(Code::invalid, "{}: the writer was finalized", path);
    if (kind_ == Kind::simple) {
        throw_unreported(lock, &path);
        lock.unlock();
        run(Task{path, std::move(body), append, std::move(after), std::move(elsewhere)});
        return;
    }
    changed_.wait(lock, [&] { return in_flight_ < depth_; });
    throw_unreported(lock, &path);
    // Room for this save's error now, in the caller's thread: the worker must record a failure without
    // allocating, since running out of memory there would have nowhere to go but std::terminate.
    unreported_.reserve(unreported_.size() + in_flight_ + 1);
    queue_.push_back(Task{path, std::move(body), append, std::move(after), std::move(elsewhere)});
    ++in_flight_;
    changed_.notify_all();
}

void Writer::wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return in_flight_ == 0; });
    throw_unreported(lock);
}

void Writer::drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return in_flight_ == 0; });
}

void Writer::finalize() {
    {
        std::unique_lock<std::mutex> lock(mutex_);
        if (finalized_) return;
        changed_.wait(lock, [&] { return in_flight_ == 0; });
        finalized_ = true;
        stopping_ = true;
        changed_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    std::unique_lock<std::mutex> lock(mutex_);
    throw_unreported(lock);
}

void Writer::worker() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and nothing left
        Task task = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        std::exception_ptr error;
        try {
            run(task);
        } catch (...) {
            error = std::current_exception();
        }
        task = Task{};  // frees the save's copy of the data before the slot is released
        lock.lock();
        if (error) unreported_.push_back(error);
        --in_flight_;
        changed_.notify_all();
    }
}

}  // namespace ckpt::core
