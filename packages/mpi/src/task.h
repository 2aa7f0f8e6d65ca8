// A call of @ddp/mpi as the MPI thread runs it (execute.cc) and JavaScript submits it (mpi.cc).
#pragma once
#include <mpi.h>
#include <node_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ddp_mpi {

enum Kind { INIT, SPLIT, FINALIZE, ALLREDUCE, BCAST, REDUCE, ALLGATHER, GATHER, SCATTER, REDUCE_SCATTER, ALLTOALL, BARRIER, P2P };
// Descriptor fields (then two counts per member): op, dtype, reduce op, root, count, failed here.
constexpr int D_COUNT = 4, D_FAILED = 5, D_FIXED = 6;  // then sent and received counts per member
// Agreement rules: none (p2p), the fixed fields equal, the count equal too.
enum Rule { NO_AGREEMENT, SAME_CALL, SAME_COUNT };
enum Status { OK, REFUSED, MPI_FAILED, SIZE_MISMATCH };

struct Buf {
  char* data = nullptr;
  size_t bytes = 0;
  napi_ref ref = nullptr;
};

struct Task {
  Kind kind;
  int comm = 0, rule = NO_AGREEMENT, type = 0, op = 0, root = 0;
  std::vector<int32_t> desc, counts;  // counts: p2p's entries
  Buf a, b;
  // results
  std::vector<int32_t> all;
  std::vector<char> out;
  Status status = OK;
  std::string error;
  int ints[2] = {0, 0};
  bool multiple = false;  // init: MPI granted MPI_THREAD_MULTIPLE
  napi_deferred deferred = nullptr;
  std::vector<MPI_Request> reqs;  // a point-to-point call's, while in flight
};

// Runs one call on the MPI thread (every MPI call of the process goes through here). A point-to-point
// call only posts its requests (t->reqs): Progress tests them between calls.
void Execute(Task* t);

// Tests a posted point-to-point call: true once it completed (status set), false while in flight.
bool Progress(Task* t);

// Ends a posted point-to-point call before destroyProcessGroup: its receives are cancelled, its sends
// delivered. Returns whether a receive was cancelled.
bool Abandon(Task* t);

}  // namespace ddp_mpi
