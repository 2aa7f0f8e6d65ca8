// The worker of half-worker.h. One job slot: the caller holds `busy`, publishes the job by bumping
// `posted`, runs its own half, then spins until the worker bumps `finished` to the same number.
#include "half-worker.h"
#include <omp.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace {

// spin this long for the next job before sleeping (and the caller for the worker's half before
// yielding): products of a step follow each other within µs, while a longer spin would take the
// core from the elementwise kernels' OpenMP threads
constexpr auto kSpin = std::chrono::microseconds(50);

struct Worker {
  std::mutex busy;  // one caller at a time
  std::atomic<uint64_t> posted{0}, finished{0};
  std::atomic<bool> sleeping{false};
  std::mutex sleepLock;
  std::condition_variable wake;
  const std::function<void()>* job = nullptr;

  void loop() {
    omp_set_num_threads(1);  // its half runs on this thread alone (oneDNN reads this thread's setting)
    uint64_t done = 0;
    for (;;) {
      const auto until = std::chrono::steady_clock::now() + kSpin;
      while (posted.load(std::memory_order_acquire) == done && std::chrono::steady_clock::now() < until) {
        __builtin_ia32_pause();
      }
      if (posted.load(std::memory_order_acquire) == done) {
        std::unique_lock<std::mutex> lock(sleepLock);
        sleeping.store(true, std::memory_order_seq_cst);
        wake.wait(lock, [&] { return posted.load(std::memory_order_acquire) != done; });
        sleeping.store(false, std::memory_order_relaxed);
      }
      (*job)();
      done++;
      finished.store(done, std::memory_order_release);
    }
  }
};

Worker& worker() {
  // never destroyed: the thread lives as long as the process (a joinable std::thread at exit would abort)
  static Worker* w = [] {
    auto* created = new Worker();
    std::thread([created] { created->loop(); }).detach();
    return created;
  }();
  return *w;
}

}  // namespace

bool runHalves(const std::function<void()>& first, const std::function<void()>& second) {
  Worker& w = worker();
  std::unique_lock<std::mutex> caller(w.busy, std::try_to_lock);
  if (!caller.owns_lock()) return false;
  w.job = &second;
  const uint64_t number = w.posted.load(std::memory_order_relaxed) + 1;
  w.posted.store(number, std::memory_order_seq_cst);
  if (w.sleeping.load(std::memory_order_seq_cst)) {
    std::lock_guard<std::mutex> lock(w.sleepLock);
    w.wake.notify_one();
  }
  first();
  // the other half is about as long as this one: spin, but yield the core if the worker was descheduled
  const auto until = std::chrono::steady_clock::now() + kSpin;
  while (w.finished.load(std::memory_order_acquire) != number) {
    if (std::chrono::steady_clock::now() < until) __builtin_ia32_pause();
    else std::this_thread::yield();
  }
  return true;
}
