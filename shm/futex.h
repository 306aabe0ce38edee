// Futex wait/wake on a 32-bit word in memory shared between processes.
//
// These are the process-shared (non-FUTEX_PRIVATE) operations: the word may be mapped at
// different addresses in different processes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace packrat::shm {

enum class FutexWaitResult { kWoken, kTimedOut };

// Blocks while *word == expected, for at most `timeout`. Returns kWoken also on spurious
// wake-ups and when *word != expected on entry: callers re-check their condition in a loop.
FutexWaitResult FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
                          std::chrono::nanoseconds timeout);

// Wakes up to `count` waiters on `word`.
void FutexWake(std::atomic<uint32_t>* word, int count = 1);
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace packrat::shm
