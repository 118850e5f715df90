// SPDX-License-Identifier: Apache-2.0
// Writers: turn "save this to that path" into the atomic save sequence, in the caller's thread or on one
// background thread — pytorch-pfn-extras' SimpleWriter, ThreadWriter and QueueWriter without their faults:
// errors of background saves are never lost (each is reported exactly once, by the next save, wait or
// finalize), finalize never hangs after a failure, and the bytes in flight are bounded by the queue depth.
#pragma once

#include "storage/storage.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ckpt::core {

class Error;

class Writer {
public:
    enum class Kind : uint32_t {
        simple = 0,  // saves run in the caller
        thread = 1,  // one background save at a time: a save first waits for the previous one
        queue = 2,   // one background worker behind a queue of queue_depth saves
    };
    using Body = std::function<void(OutputFile&)>;

    // queue_depth: saves in flight (queued or running) before submit blocks; 0 means 1. Ignored for simple.
    Writer(Kind kind, size_t queue_depth, std::shared_ptr<Storage> storage);
    ~Writer();  // finalizes; errors not yet reported are dropped (call finalize to see them)
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    // Saves `body`'s bytes to `path`: atomically (temporary, sync, rename, directory sync) or, with `append`,
    // appended in place (not atomic). First reports — by throwing — an error of an earlier background save;
    // the new save is then not started, and the error's message says so, naming `path`. Blocks while the queue
    // is full. Throws Error(invalid) after finalize.
    // `after`, if given, runs once the save has committed and is durable (on the same thread as the save, before
    // its slot is released), never after a failed save: the checkpoint manager's retention, which must never
    // delete anything before the new file is durable, and the C API's after_save callback. What it throws is the
    // save's error.
    // `elsewhere`, if given, is the storage this save goes to instead of the writer's (a path that names its own,
    // as an s3:// URL does).
    void submit(const std::string& path, Body body, bool append, std::function<void()> after = nullptr,
                std::shared_ptr<Storage> elsewhere = nullptr);
    // Waits until every submitted save has finished; throws the first unreported error.
    void wait();
    // Waits until every submitted save has finished, leaving their errors for the next save, wait or finalize.
    void drain();
    // wait(), then stops the background thread. Idempotent: later calls do nothing.
    void finalize();

    Storage& storage() { return *storage_; }
    Kind kind() const { return kind_; }

private:
    struct Task {
        std::string path;
        Body body;
        bool append;
        std::function<void()> after;
        std::shared_ptr<Storage> elsewhere;
    };
    void run(const Task& task);
    void worker();
    // not_started: the path of the save the reporting call asked for, which the message then says was not started.
    void throw_unreported(std::unique_lock<std::mutex>& lock, const std::string* not_started = nullptr);

    const Kind kind_;
    const size_t depth_;
    const std::shared_ptr<Storage> storage_;

    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Task> queue_;
    size_t in_flight_ = 0;  // queued + running
    bool stopping_ = false;
    bool finalized_ = false;
    std::vector<std::exception_ptr> unreported_;
    std::thread thread_;
};

}  // namespace ckpt::core
