// The MPI side of @ddp/mpi: each call as the MPI thread runs it. Before a collective the members
// allgather a small descriptor of the call (op, dtype, reduce op, root, count, a failed-here
// flag, counts sent to and received from each member); a call that differs or failed on one
// rank is refused on every rank instead of deadlocking or moving the wrong bytes (Agrees;
// JavaScript words the error from the descriptors).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "task.h"

namespace ddp_mpi {
namespace {

std::mutex commsMu;  // SPLIT adds to comms on its parent's thread while other communicators' threads read it
std::vector<MPI_Comm> comms;  // handle → communicator; 0 is MPI_COMM_WORLD

MPI_Comm CommOf(int handle) {
  std::lock_guard<std::mutex> lock(commsMu);
  return comms[handle];
}
MPI_Op nanMax[2], nanMin[2];  // float, double

// PyTorch's max/min: NaN propagates (MPI_MAX on floats keeps whichever the comparison picks).
template <typename T, bool Max>
void NanMinMax(void* in, void* inout, int* len, MPI_Datatype*) {
  T* a = static_cast<T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; i++) {
    T x = b[i], y = a[i];
    b[i] = x != x ? x : y != y ? y : Max ? (x > y ? x : y) : (x < y ? x : y);
  }
}

MPI_Datatype TypeOf(int code) {
  switch (code) {
    case 1: return MPI_FLOAT;
    case 2: return MPI_DOUBLE;
    case 3: return MPI_INT32_T;
    case 4: return MPI_UINT16_T;
    default: return MPI_BYTE;
  }
}

MPI_Op OpOf(int code, int type) {
  bool fp = type == 1 || type == 2;
  switch (code) {
    case 3: return fp ? nanMax[type - 1] : MPI_MAX;
    case 4: return fp ? nanMin[type - 1] : MPI_MIN;
    case 5: return MPI_PROD;
    default: return MPI_SUM;  // sum, and avg (JavaScript divides after)
  }
}

std::string ErrorString(int rc) {
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, s, &n);
  return std::string(s, n);
}

// Whether the counts a call adds up fit MPI's int displacements (a gather of more elements in all
// overflowed them: a wrong-sized output, memory past its end). Refused as a mismatch; comm names it.
bool Fits(Task* t, int size) {
  const int stride = D_FIXED + 2 * size;
  const int32_t* all = t->all.data();
  int64_t gathered = 0;
  for (int r = 0; r < size; r++) {
    const int32_t* d = all + r * stride;
    gathered += d[D_COUNT];
    int64_t sent = 0, received = 0;
    for (int j = 0; j < size; j++) sent += d[D_FIXED + j], received += d[D_FIXED + size + j];
    if (sent > INT32_MAX || received > INT32_MAX) return false;
  }
  return gathered <= INT32_MAX || (t->kind != ALLGATHER && t->kind != GATHER);
}

// Every member called the same thing and none failed before calling. Each member evaluates
// the same condition on the same descriptors, so all run the call or all refuse it.
bool Agrees(Task* t, int size) {
  const int stride = D_FIXED + 2 * size;
  const int32_t* mine = t->desc.data();
  const int32_t* all = t->all.data();
  for (int r = 0; r < size; r++) {
    const int32_t* d = all + r * stride;
    if (d[D_FAILED] != 0 || std::memcmp(d, mine, D_COUNT * sizeof(int32_t)) != 0) return false;
    if (t->rule == SAME_COUNT && d[D_COUNT] != mine[D_COUNT]) return false;
    // what the root sends r is what r receives
    if (t->kind == SCATTER && all[t->root * stride + D_FIXED + r] != d[D_COUNT]) return false;
    // what r sends each member j is what j receives from r
    for (int j = 0; t->kind == ALLTOALL && j < size; j++) {
      if (d[D_FIXED + j] != all[j * stride + D_FIXED + size + r]) return false;
    }
  }
  return Fits(t, size);
}

// Element counts of every member (from the descriptors) and their displacements.
void CountsOf(Task* t, int size, std::vector<int>& counts, std::vector<int>& displs) {
  counts.resize(size);
  displs.resize(size);
  for (int r = 0, off = 0; r < size; off += counts[r++]) {
    counts[r] = t->all[r * (D_FIXED + 2 * size) + D_COUNT];
    displs[r] = off;
  }
}

std::vector<int> Prefix(const int32_t* counts, int n) {
  std::vector<int> d(n);
  for (int i = 0, off = 0; i < n; off += counts[i++]) d[i] = off;
  return d;
}

// Posts every send and receive of the call; the MPI thread tests them between later calls (Progress).
// Waiting here held the thread: a send past Open MPI's eager limit (~4 KB) waited for its receive, while
// the peer's matching receive queued behind the peer's own send (send and recv at once hung; probe CJ).
int StartP2P(Task* t, MPI_Comm c) {
  const size_t n = t->counts.size() / 5;  // per entry: is send, peer, tag, byte offset, bytes
  t->reqs.assign(n, MPI_REQUEST_NULL);
  for (size_t i = 0; i < n; i++) {
    const int32_t* e = &t->counts[i * 5];
    int rc = e[0] ? MPI_Isend(t->a.data + e[3], e[4], MPI_BYTE, e[1], e[2], c, &t->reqs[i])
                  : MPI_Irecv(t->a.data + e[3], e[4], MPI_BYTE, e[1], e[2], c, &t->reqs[i]);
    if (rc != MPI_SUCCESS) {
      t->reqs.resize(i);  // the ones posted: the failed one holds no request
      Abandon(t);
      return rc;
    }
  }
  return MPI_SUCCESS;
}

// One reduction of `in` into `out` (in place when they are the same) for allReduce, reduce or reduceScatter.
int Reduce(Task* t, MPI_Comm c, int me, char* in, char* out, int n, MPI_Op op) {
  const MPI_Datatype ty = TypeOf(t->type);
  if (t->kind == REDUCE_SCATTER) return MPI_Reduce_scatter_block(in, out, n, ty, op, c);
  void* send = in == out && (t->kind == ALLREDUCE || me == t->root) ? MPI_IN_PLACE : in;
  if (t->kind == ALLREDUCE) return MPI_Allreduce(send, out, n, ty, op, c);
  return MPI_Reduce(send, out, n, ty, op, t->root, c);
}

// AVG of floats: the sum divided by N, except an element whose sum overflowed to ±inf while
// every input is finite: that one is Σ(x/N) (a second reduction, run by every member when any
// member saw such an element), so averages of values near the type's limit stay finite.
template <typename T>
int Average(Task* t, MPI_Comm c, int me, int size, const std::vector<char>& input, T* result, int n, bool receives) {
  int overflow = 0;
  for (int i = 0; receives && i < n && !overflow; i++) overflow = std::isinf(result[i]);
  int rc = MPI_Allreduce(MPI_IN_PLACE, &overflow, 1, MPI_INT, MPI_LOR, c);
  std::vector<T> scaled, scratch;
  if (rc == MPI_SUCCESS && overflow) {
    const T* x = reinterpret_cast<const T*>(input.data());
    scaled.resize(input.size() / sizeof(T));
    for (size_t i = 0; i < scaled.size(); i++) scaled[i] = x[i] / static_cast<T>(size);
    scratch.resize(n);
    rc = Reduce(t, c, me, reinterpret_cast<char*>(scaled.data()), reinterpret_cast<char*>(scratch.data()), n, MPI_SUM);
  }
  for (int i = 0; rc == MPI_SUCCESS && receives && i < n; i++) {
    const bool redo = overflow && std::isinf(result[i]) && std::isfinite(scratch[i]);
    result[i] = redo ? scratch[i] : result[i] / static_cast<T>(size);
  }
  return rc;
}

// allReduce, reduce and reduceScatter; AVG sums, then divides (int32 truncating, like C).
int Reduction(Task* t, MPI_Comm c, int me, int size) {
  const int n = t->desc[D_COUNT];
  char* result = t->kind == REDUCE_SCATTER ? t->b.data : t->a.data;
  const bool avg = t->op == 2, receives = t->kind != REDUCE || me == t->root;
  std::vector<char> input;
  if (avg && t->type != 3) input.assign(t->a.data, t->a.data + t->a.bytes);
  int rc = Reduce(t, c, me, t->a.data, result, n, OpOf(t->op, t->type));
  if (rc != MPI_SUCCESS || !avg) return rc;
  if (t->type == 1) return Average(t, c, me, size, input, reinterpret_cast<float*>(result), n, receives);
  if (t->type == 2) return Average(t, c, me, size, input, reinterpret_cast<double*>(result), n, receives);
  int32_t* r = reinterpret_cast<int32_t*>(result);
  for (int i = 0; receives && i < n; i++) r[i] /= size;
  return MPI_SUCCESS;
}

// The collective itself, after the members agreed.
int RunCollective(Task* t, MPI_Comm c, int me, int size) {
  const MPI_Datatype ty = TypeOf(t->type);
  const int n = t->desc.empty() ? 0 : t->desc[D_COUNT];
  int elem = 1;
  MPI_Type_size(ty, &elem);
  std::vector<int> counts, displs;
  switch (t->kind) {
    case ALLREDUCE:
    case REDUCE:
    case REDUCE_SCATTER: return Reduction(t, c, me, size);
    case BCAST: return MPI_Bcast(t->a.data, n, ty, t->root, c);
    case ALLGATHER:
    case GATHER: {
      CountsOf(t, size, counts, displs);
      const bool receives = t->kind == ALLGATHER || me == t->root;
      if (receives) t->out.resize(static_cast<size_t>(displs[size - 1] + counts[size - 1]) * elem);
      if (t->kind == ALLGATHER) return MPI_Allgatherv(t->a.data, n, ty, t->out.data(), counts.data(), displs.data(), ty, c);
      return MPI_Gatherv(t->a.data, n, ty, t->out.data(), counts.data(), displs.data(), ty, t->root, c);
    }
    case SCATTER: {
      const int32_t* sizes = &t->all[t->root * (D_FIXED + 2 * size) + D_FIXED];
      std::vector<int> sc(sizes, sizes + size), sd = Prefix(sizes, size);
      return MPI_Scatterv(t->a.data, sc.data(), sd.data(), ty, t->b.data, n, ty, t->root, c);
    }
    case ALLTOALL: {
      const int32_t* send = t->desc.data() + D_FIXED;
      std::vector<int> sc(send, send + size), rc(send + size, send + 2 * size);
      std::vector<int> sd = Prefix(send, size), rd = Prefix(send + size, size);
      return MPI_Alltoallv(t->a.data, sc.data(), sd.data(), ty, t->b.data, rc.data(), rd.data(), ty, c);
    }
    default: return MPI_SUCCESS;  // BARRIER: the agreement's allgather is one
  }
}

}  // namespace

void Execute(Task* t) {
  int rc = MPI_SUCCESS;
  if (t->kind == INIT) {
    int provided = 0;
    rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    t->multiple = provided >= MPI_THREAD_MULTIPLE;
    if (rc == MPI_SUCCESS && !t->multiple)  // comm warns with it
      t->error = "MPI granted thread level " + std::to_string(provided) +
                 " (not MPI_THREAD_MULTIPLE): every group's calls run on one thread, in the order this rank issued "
                 "them, so groups whose calls ranks issue in different orders (a checkpoint saved in the background "
                 "beside training) wait on each other until the timeout";
    if (rc == MPI_SUCCESS) {
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // errors come back as codes, not exit()
      comms.assign(1, MPI_COMM_WORLD);
      MPI_Op_create(&NanMinMax<float, true>, 1, &nanMax[0]);
      MPI_Op_create(&NanMinMax<double, true>, 1, &nanMax[1]);
      MPI_Op_create(&NanMinMax<float, false>, 1, &nanMin[0]);
      MPI_Op_create(&NanMinMax<double, false>, 1, &nanMin[1]);
      MPI_Comm_rank(MPI_COMM_WORLD, &t->ints[0]);
      MPI_Comm_size(MPI_COMM_WORLD, &t->ints[1]);
    }
  } else if (t->kind == FINALIZE) {
    rc = MPI_Finalize();
  } else if (t->kind == SPLIT) {
    MPI_Comm sub = MPI_COMM_NULL;
    rc = MPI_Comm_split(CommOf(t->comm), t->root < 0 ? MPI_UNDEFINED : t->root, t->op, &sub);
    std::lock_guard<std::mutex> lock(commsMu);
    t->ints[0] = sub == MPI_COMM_NULL ? -1 : static_cast<int>(comms.size());
    if (sub != MPI_COMM_NULL) comms.push_back(sub);
  } else {
    MPI_Comm c = CommOf(t->comm);
    int me = 0, size = 1;
    MPI_Comm_rank(c, &me);
    MPI_Comm_size(c, &size);
    if (t->rule != NO_AGREEMENT) {
      const int stride = D_FIXED + 2 * size;
      if (t->desc.size() != static_cast<size_t>(stride)) {
        t->status = MPI_FAILED;
        t->error = "descriptor of " + std::to_string(t->desc.size()) + " words, expected " + std::to_string(stride);
        return;
      }
      t->all.resize(static_cast<size_t>(stride) * size);
      rc = MPI_Allgather(t->desc.data(), stride, MPI_INT32_T, t->all.data(), stride, MPI_INT32_T, c);
      if (rc == MPI_SUCCESS && !Agrees(t, size)) t->status = REFUSED;
    }
    if (rc == MPI_SUCCESS && t->status == OK) rc = t->kind == P2P ? StartP2P(t, c) : RunCollective(t, c, me, size);
  }
  if (rc != MPI_SUCCESS && t->status != SIZE_MISMATCH) {
    t->status = MPI_FAILED;
    t->error = ErrorString(rc) + (t->error.empty() ? "" : ": " + t->error);
  }
}

bool Progress(Task* t) {
  const int n = static_cast<int>(t->reqs.size());
  int complete = 0;
  std::vector<MPI_Status> st(n);
  int rc = MPI_Testall(n, t->reqs.data(), &complete, st.data());
  if (rc == MPI_SUCCESS && !complete) return false;
  for (int i = 0; (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && i < n; i++) {
    const int32_t* e = &t->counts[i * 5];
    if (e[0]) continue;
    int got = 0;
    MPI_Get_count(&st[i], MPI_BYTE, &got);
    // a shorter message completes a receive without error in MPI: here it is one, as a longer one is
    const bool truncated = rc == MPI_ERR_IN_STATUS && st[i].MPI_ERROR == MPI_ERR_TRUNCATE;
    if (truncated || got != e[4]) {
      t->status = SIZE_MISMATCH;
      // the caller's tag: @ddp/comm puts the dtype in the MPI tag's low 3 bits (mpi-calls.ts)
      t->error = "rank " + std::to_string(e[1]) + " sent " + (truncated ? "more than " : "") + std::to_string(got) +
                 " bytes (tag " + std::to_string(e[2] >> 3) + "), this receive expects " + std::to_string(e[4]);
      rc = MPI_SUCCESS;
      break;
    }
  }
  if (rc != MPI_SUCCESS) {
    t->status = MPI_FAILED;
    t->error = ErrorString(rc);
  }
  t->reqs.clear();
  return true;
}

bool Abandon(Task* t) {
  for (size_t i = 0; i < t->reqs.size(); i++)
    if (t->reqs[i] != MPI_REQUEST_NULL && !t->counts[i * 5]) MPI_Cancel(&t->reqs[i]);
  // sends are delivered (MPI_Finalize would wait for them too): reported done, not failed while their data
  // arrives; a receive already matched cannot be cancelled and completes with its data (review)
  std::vector<MPI_Status> st(t->reqs.size());
  MPI_Waitall(static_cast<int>(t->reqs.size()), t->reqs.data(), st.data());
  bool cancelled = false;
  for (size_t i = 0; i < st.size(); i++) {
    int was = 0;
    if (!t->counts[i * 5]) MPI_Test_cancelled(&st[i], &was);
    cancelled = cancelled || was;
  }
  t->reqs.clear();
  return cancelled;
}

}  // namespace ddp_mpi
