// Open MPI for @ddp/comm's 'mpi' backend. Every MPI call runs on one dedicated thread
// (MPI_THREAD_SERIALIZED), taken from a FIFO in the order JavaScript issued the calls, so each
// rank runs its calls in program order whatever the communicator (execute.cc runs them); sends and
// receives are posted in that order and complete in the background. Each call resolves a promise
// through a thread-safe function.
#include <algorithm>
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

// Never destroyed: at exit() glibc's pthread_cond_destroy waits for the waiters, and the detached
// thread waits in cv forever, so a rank that exited without destroyProcessGroup never ended and
// mpirun waited on it (the whole job hung). Leaked, they stay valid until the process is gone.
std::mutex& mu = *new std::mutex;
std::condition_variable& cv = *new std::condition_variable;
std::deque<Task*>& queue = *new std::deque<Task*>;
napi_threadsafe_function done = nullptr;
int pending = 0;  // tasks not yet resolved (main thread only): the tsfn keeps the loop alive while > 0
bool detached = false;  // after unref(): pending tasks no longer keep the loop alive

// Takes calls in order; point-to-point calls are tested between them (and while none comes, backing off
// from 1 µs to 100 µs) and resolved as they complete, in whatever order.
void Loop() {
  std::vector<Task*> inflight;
  auto idle = std::chrono::microseconds(1);
  for (;;) {
    Task* t = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu);
      const auto ready = [] { return !queue.empty(); };
      if (inflight.empty()) cv.wait(lock, ready);
      else cv.wait_for(lock, idle, ready);
      if (!queue.empty()) {
        t = queue.front();
        queue.pop_front();
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
    }
    bool progressed = t != nullptr;
    if (t != nullptr) {
      Execute(t);
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

napi_value Str(napi_env env, const std::string& s) {
  napi_value v;
  napi_create_string_utf8(env, s.c_str(), s.size(), &v);
  return v;
}

// On the main thread: [status, descriptors, output, message] for a call; ints for init/split.
void Resolve(napi_env env, napi_value, void*, void* data) {
  Task* t = static_cast<Task*>(data);
  if (env != nullptr) {
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
    std::thread(Loop).detach();  // never joined: a call stuck in MPI must not keep the process from exiting
  }
  napi_value promise;
  napi_create_promise(env, &t->deferred, &promise);
  if (pending++ == 0 && !detached) napi_ref_threadsafe_function(env, done);
  {
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(t);
  }
  cv.notify_one();
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
