// Open MPI for @ddp/comm's 'mpi' backend. Each communicator's calls run on a thread of its own
// (MPI_THREAD_MULTIPLE), taken from its FIFO in the order JavaScript issued them (execute.cc runs
// them): a group's calls keep program order, and groups progress independently, as on the default
// backend. One thread for all of them deadlocked when ranks interleaved two groups' calls
// differently: a checkpoint's background collectives on a duplicated group beside training (probe
// DD). Where MPI grants less than MULTIPLE, every call runs on the world's thread, as before. Sends
// and receives are posted in that order and complete in the background. Each call resolves a promise
// through a thread-safe function.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "task.h"

using namespace ddp_mpi;

namespace {

// Never destroyed: at exit() glibc's pthread_cond_destroy waits for the waiters, and a detached
// thread waits in its cv forever, so a rank that exited without destroyProcessGroup never ended and
// mpirun waited on it (the whole job hung). Leaked, they stay valid until the process is gone.
struct Lane {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Task*> queue;
  std::thread thread;  // the world's is detached; the others are joined by its FINALIZE
};
std::mutex& lanesMu = *new std::mutex;
std::vector<Lane*>& lanes = *new std::vector<Lane*>;  // by communicator handle (null: no call yet)
std::atomic<bool> multiple{false};  // MPI granted MPI_THREAD_MULTIPLE: a thread per communicator
bool finalizing = false;  // under lanesMu: FINALIZE was issued; later calls fail at once
napi_threadsafe_function done = nullptr;
int pending = 0;  // tasks not yet resolved (main thread only): the tsfn keeps the loop alive while > 0
bool detached = false;  // after unref(): pending tasks no longer keep the loop alive

void Enqueue(Lane* lane, Task* t) {
  {
    std::lock_guard<std::mutex> lock(lane->mu);
    lane->queue.push_back(t);
  }
  lane->cv.notify_one();
}

// The world's FINALIZE, before MPI_Finalize: every other lane runs what was issued on it before,
// then ends (its receives still posted cancelled); MPI_Finalize needs every other thread out of MPI.
void StopOtherLanes() {
  std::vector<Lane*> others;
  {
    // no call reaches a lane after FINALIZE was issued (Call holds lanesMu while it enqueues): each stop
    // comes after every call of its lane
    std::lock_guard<std::mutex> lock(lanesMu);
    for (size_t i = 1; i < lanes.size(); i++)
      if (lanes[i] != nullptr) others.push_back(lanes[i]);
  }
  for (Lane* lane : others) {
    Task* stop = new Task();
    stop->kind = FINALIZE;
    Enqueue(lane, stop);
  }
  for (Lane* lane : others) lane->thread.join();
}

// Takes one communicator's calls in order; point-to-point calls are tested between them (and while none
// comes, backing off from 1 µs to 100 µs) and resolved as they complete, in whatever order.
void Loop(Lane* lane, bool world) {
  std::vector<Task*> inflight;
  auto idle = std::chrono::microseconds(1);
  for (;;) {
    Task* t = nullptr;
    {
      std::unique_lock<std::mutex> lock(lane->mu);
      const auto ready = [lane] { return !lane->queue.empty(); };
      if (inflight.empty()) lane->cv.wait(lock, ready);
      else lane->cv.wait_for(lock, idle, ready);
      if (!lane->queue.empty()) {
        t = lane->queue.front();
        lane->queue.pop_front();
      }
    }
    if (t != nullptr && t->kind == FINALIZE) {
      for (Task* p : inflight) {
        if (Abandon(p)) {
          p->status = MPI_FAILED;
          p->error = "a receive ended by destroyProcessGroup before it completed";
        }
        napi_call_threadsafe_function(done, p, napi_tsfn_blocking);
      }
      inflight.clear();
      if (!world) {  // StopOtherLanes' task: nothing to resolve
        delete t;
        return;
      }
      StopOtherLanes();
    }
    bool progressed = t != nullptr;
    if (t != nullptr) {
      Execute(t);
      if (t->kind == INIT) multiple = t->multiple;
      if (!t->reqs.empty()) {
        inflight.push_back(t);
      } else {
        const bool last = t->kind == FINALIZE;
        napi_call_threadsafe_function(done, t, napi_tsfn_blocking);
        if (last) return;
      }
    }
    for (auto it = inflight.begin(); it != inflight.end();) {
      if (!Progress(*it)) {
        ++it;
        continue;
      }
      napi_call_threadsafe_function(done, *it, napi_tsfn_blocking);
      it = inflight.erase(it);
      progressed = true;
    }
    // a completion is noticed at most 100 µs late (Open MPI's rendezvous also advances only when tested)
    idle = progressed ? std::chrono::microseconds(1) : std::min(2 * idle, std::chrono::microseconds(100));
  }
}

// The lane of communicator `comm` (all on the world's without MPI_THREAD_MULTIPLE), started on its first
// call. Under lanesMu.
Lane* LaneOf(int comm) {
  const size_t at = multiple ? static_cast<size_t>(comm) : 0;
  if (lanes.size() <= at) lanes.resize(at + 1, nullptr);
  if (lanes[at] == nullptr) {
    lanes[at] = new Lane();
    lanes[at]->thread = std::thread(Loop, lanes[at], at == 0);
    // never joined: a call stuck in MPI must not keep the process from exiting
    if (at == 0) lanes[at]->thread.detach();
  }
  return lanes[at];
}

napi_value Str(napi_env env, const std::string& s) {
  napi_value v;
  napi_create_string_utf8(env, s.c_str(), s.size(), &v);
  return v;
}

// On the main thread: a call's promise resolved with [status, descriptors, output, message, i0, i1].
void Settle(napi_env env, Task* t) {
  napi_value r, v;
  napi_create_array_with_length(env, 4, &r);
  napi_create_int32(env, t->status, &v);
  napi_set_element(env, r, 0, v);
  if (!t->all.empty()) {
    napi_value ab;
    void* p;
    napi_create_arraybuffer(env, t->all.size() * 4, &p, &ab);
    std::memcpy(p, t->all.data(), t->all.size() * 4);
    napi_create_typedarray(env, napi_int32_array, t->all.size(), ab, 0, &v);
    napi_set_element(env, r, 1, v);
  }
  void* p;
  napi_create_arraybuffer(env, t->out.size(), &p, &v);
  if (!t->out.empty()) std::memcpy(p, t->out.data(), t->out.size());
  napi_set_element(env, r, 2, v);
  napi_set_element(env, r, 3, Str(env, t->error));
  for (int i = 0; i < 2; i++) {
    napi_create_int32(env, t->ints[i], &v);
    napi_set_element(env, r, 4 + i, v);
  }
  for (Buf* b : {&t->a, &t->b}) if (b->ref) napi_delete_reference(env, b->ref);
  napi_resolve_deferred(env, t->deferred, r);
}

void Resolve(napi_env env, napi_value, void*, void* data) {
  Task* t = static_cast<Task*>(data);
  if (env != nullptr) {
    Settle(env, t);
    if (--pending == 0) napi_unref_threadsafe_function(env, done);
    if (t->kind == FINALIZE) napi_release_threadsafe_function(done, napi_tsfn_release);
  }
  delete t;
}

// A typed array argument (or null/undefined): its bytes, referenced until the call completes.
bool BufArg(napi_env env, napi_value v, Buf& b) {
  napi_valuetype vt;
  napi_typeof(env, v, &vt);
  if (vt == napi_null || vt == napi_undefined) return true;
  bool is = false;
  napi_is_typedarray(env, v, &is);
  if (!is) return false;
  napi_typedarray_type type;
  size_t length, offset;
  napi_value ab;
  void* data;
  napi_get_typedarray_info(env, v, &type, &length, &data, &ab, &offset);
  size_t elem = type == napi_float64_array ? 8 : type == napi_uint16_array || type == napi_int16_array ? 2
                : type == napi_uint8_array || type == napi_int8_array ? 1 : 4;
  b.data = static_cast<char*>(data);
  b.bytes = length * elem;
  napi_create_reference(env, v, 1, &b.ref);
  return true;
}

std::vector<int32_t> IntsArg(napi_env env, napi_value v) {
  bool is = false;
  napi_is_typedarray(env, v, &is);
  if (!is) return {};
  napi_typedarray_type type;
  size_t length, offset;
  napi_value ab;
  void* data;
  napi_get_typedarray_info(env, v, &type, &length, &data, &ab, &offset);
  if (type != napi_int32_array) return {};
  return std::vector<int32_t>(static_cast<int32_t*>(data), static_cast<int32_t*>(data) + length);
}

// call(kind, comm, rule, type, op, root, desc, counts, a, b): a promise of [status, descriptors, output, message, i0, i1].
napi_value Call(napi_env env, napi_callback_info info) {
  size_t argc = 10;
  napi_value argv[10];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Task* t = new Task();
  int ints[6] = {0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 6; i++) napi_get_value_int32(env, argv[i], &ints[i]);
  t->kind = static_cast<Kind>(ints[0]);
  t->comm = ints[1], t->rule = ints[2], t->type = ints[3], t->op = ints[4], t->root = ints[5];
  t->desc = IntsArg(env, argv[6]);
  t->counts = IntsArg(env, argv[7]);
  if (!BufArg(env, argv[8], t->a) || !BufArg(env, argv[9], t->b) || (t->kind == INIT) != (done == nullptr)) {
    delete t;
    napi_throw_error(env, nullptr, "ddp_mpi.call: bad arguments (or init called twice / not first)");
    return nullptr;
  }
  if (t->kind == INIT) {
    napi_value name = Str(env, "ddp_mpi");
    napi_create_threadsafe_function(env, nullptr, nullptr, name, 0, 1, nullptr, nullptr, nullptr, Resolve, &done);
  }
  napi_value promise;
  napi_create_promise(env, &t->deferred, &promise);
  {
    // a call after FINALIZE would reach MPI after MPI_Finalize, or never run; `done` may be released by then
    std::lock_guard<std::mutex> lock(lanesMu);
    if (!finalizing) {
      if (pending++ == 0 && !detached) napi_ref_threadsafe_function(env, done);
      Enqueue(LaneOf(t->comm), t);
      finalizing = t->kind == FINALIZE;
      return promise;
    }
  }
  t->status = MPI_FAILED;
  t->error = "MPI was finalised by destroyProcessGroup";
  Settle(env, t);
  delete t;
  return promise;
}

// unref(): calls still pending (stuck after a timeout) no longer keep the process alive.
napi_value Unref(napi_env env, napi_callback_info) {
  if (done != nullptr) napi_unref_threadsafe_function(env, done);
  detached = true;  // and never ref it again
  return nullptr;
}

napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "call", NAPI_AUTO_LENGTH, Call, nullptr, &fn);
  napi_set_named_property(env, exports, "call", fn);
  napi_create_function(env, "unref", NAPI_AUTO_LENGTH, Unref, nullptr, &fn);
  napi_set_named_property(env, exports, "unref", fn);
  return exports;
}

}  // namespace


NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
