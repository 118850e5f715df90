// SPDX-License-Identifier: Apache-2.0
#include "manager/dir_claim.hpp"

#include <map>
#include <mutex>

#include <sys/stat.h>
#include <unistd.h>

namespace ckpt::core {

namespace {

DirKey key_of(const std::shared_ptr<Storage>& storage, const std::string& dir) {
    struct stat st {};
    if (storage == posix_storage() && ::stat(dir.c_str(), &st) == 0)
        return DirKey{nullptr, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), std::string()};
    return DirKey{storage.get(), 0, 0, dir};
}

}  // namespace

// One locked directory of this process.
struct DirHolder {
    std::unique_ptr<DirLock> lock;
    // Held by the owner while it deletes in the directory (retention, cleanup) and by a takeover, so that an older
    // manager's retention never runs beside its successor. `owner` changes under it.
    std::mutex work;
    uint64_t owner = 0;
    // The process that took the lock: a child forked since holds the parent's entries, which are not its own (a
    // takeover there would take the parent's lock, which the child's own lock attempt is refused).
    pid_t pid = ::getpid();
};

struct DirClaim::Registry {
    std::mutex mutex;
    std::map<DirKey, std::shared_ptr<DirHolder>> held;
    uint64_t next = 1;
};

// Never destroyed: managers that outlive static destruction still release through it.
DirClaim::Registry& DirClaim::registry() {
    static Registry* r = new Registry;
    return *r;
}

std::shared_ptr<DirClaim> DirClaim::take(const std::shared_ptr<Storage>& storage, const std::string& dir,
                                         bool* took_over) {
    Registry& r = registry();
    std::lock_guard<std::mutex> guard(r.mutex);
    const uint64_t id = r.next++;
    const DirKey key = key_of(storage, dir);
    *took_over = false;
    // Everything that allocates comes before the registry changes, and the claim gets its holder last: running
    // out of memory leaves the registry as it was (and a claim without a holder releases nothing).
    auto claim = std::make_shared<DirClaim>(key, nullptr, id);
    if (auto it = r.held.find(key); it != r.held.end() && it->second->pid == ::getpid()) {
        std::lock_guard<std::mutex> work(it->second->work);  // waits for the older manager's retention
        it->second->owner = id;
        claim->holder_ = it->second;
        *took_over = true;
        return claim;
    }
    std::unique_ptr<DirLock> lock = storage->lock(dir);  // Error(busy) when another process holds it
    if (!lock) return claim;  // a storage without locking
    auto holder = std::make_shared<DirHolder>();
    holder->owner = id;
    auto slot = r.held.find(key);  // an entry a forked child inherited is replaced
    if (slot == r.held.end()) slot = r.held.emplace(key, nullptr).first;
    holder->lock = std::move(lock);  // nothing throws from here on
    slot->second = holder;
    claim->holder_ = std::move(holder);
    return claim;
}

DirClaim::DirClaim(DirKey key, std::shared_ptr<DirHolder> holder, uint64_t id)
    : key_(std::move(key)), holder_(std::move(holder)), id_(id) {}

DirClaim::~DirClaim() {
    if (!holder_) return;
    Registry& r = registry();
    std::lock_guard<std::mutex> guard(r.mutex);
    std::lock_guard<std::mutex> work(holder_->work);
    if (holder_->owner != id_) return;
    holder_->lock.reset();
    if (auto it = r.held.find(key_); it != r.held.end() && it->second == holder_) r.held.erase(it);
}

bool DirClaim::owned() const {
    if (!holder_) return true;
    std::lock_guard<std::mutex> work(holder_->work);
    return holder_->owner == id_;
}

bool DirClaim::while_owned(const std::function<void()>& f) const {
    if (!holder_) {
        f();
        return true;
    }
    std::lock_guard<std::mutex> work(holder_->work);
    if (holder_->owner != id_) return false;
    f();
    return true;
}

}  // namespace ckpt::core
