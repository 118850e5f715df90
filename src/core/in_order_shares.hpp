// SPDX-License-Identifier: Apache-2.0
// Checking many independent items — the members of a large archive — on several threads, with the error a loop on
// one thread would give.
//
// Each thread takes a contiguous share of the items and goes through it in order, stopping at its first failure.
// The exception reported is that of the smallest item that failed: when whether an item fails depends on that item
// alone, it is the one a single loop over all of them would have thrown first, so messages do not depend on the
// number of threads or on timing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace ckpt::core {

// Calls body(state, i) for every i in [0, n), on up to `threads` threads, each with its own default-constructed
// State (buffers it reuses from item to item). Returns when all are done; throws as described above.
template <typename State, typename Body>
void for_each_in_order_shares(size_t n, unsigned threads, const Body& body) {
    threads = static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(threads, n)));
    std::vector<size_t> failed_at(threads, n);
    std::vector<std::exception_ptr> errors(threads);
    const auto run = [&](unsigned t) {
        size_t i = n / threads * t + std::min<size_t>(t, n % threads);
        const size_t end = i + n / threads + (t < n % threads ? 1 : 0);
        try {
            State state;
            for (; i < end; ++i) body(state, i);
        } catch (...) {
            failed_at[t] = i;
            errors[t] = std::current_exception();
        }
    };
    std::vector<std::thread> helpers;
    helpers.reserve(threads - 1);
    unsigned started = 1;
    try {
        for (; started < threads; ++started) helpers.emplace_back(run, started);
    } catch (const std::system_error&) {
        // No more threads to be had: this thread takes the shares that found none.
    } catch (...) {
        for (auto& h : helpers) h.join();  // out of memory: the threads that did start use what is on this stack
        throw;
    }
    run(0);
    for (unsigned t = started; t < threads; ++t) run(t);
    for (auto& h : helpers) h.join();
    const auto first = std::min_element(failed_at.begin(), failed_at.end());
    if (*first < n) std::rethrow_exception(errors[static_cast<size_t>(first - failed_at.begin())]);
}

}  // namespace ckpt::core
