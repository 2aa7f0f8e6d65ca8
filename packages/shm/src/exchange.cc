// A small all-reduce among the ranks of one host as one synchronous call, as Open MPI's
// shared-memory transport does it: copy this rank's input into its slot, publish a counter,
// spin (yielding the core between looks) until every peer has published the
// same collective, then reduce every peer's slot into the output. One flag per op: slots
// alternate between two sets, and a peer publishes op k+1 only after it finished reading op
// k, so a set is never rewritten while read. Every rank reduces every element in the same
// order (chunk c starts from rank c's value, as the two-step path of @ddp/comm's
// algorithms/shm.ts, where rank c reduces it), so all ranks get the same bits, and the same
// bits as that path. It records this rank's fingerprint of the op in the segment's table first
// (as shm-lane.ts's record(), one bell for both), so JavaScript builds nothing per op. The
// caller (packages/comm/src/transport/shm-lane.ts) lays out the segment and owns the waits
// beyond the spin budget: the call returns LATE (resumable: the phase is kept in `params`) and
// JavaScript sleeps on the peer's bell, checking liveness and the deadline between calls.
#include <node.h>

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string>
#include <type_traits>

#include "exchange.h"
#include "reduce.h"

using namespace v8;

namespace {

// params: an Int32Array the lane fills (layout in words, this op, the phase it reached).
enum Param {
  kSize, kRank, kBells, kProgress, kTable, kSlots, kSlotBytes,  // the segment (words; slots in bytes)
  kGen, kSeq, kFpOp, kFpDtype, kFpReduce, kFpCount, kFpRoot,   // this op: counter target, fingerprint
  kDtype, kOp, kSpinUs,                                        // 0 f32 1 f64 2 i32 3 f16 4 bf16; 0 sum 1 prod 2 max 3 min 4 avg
  kPhase, kPeer, kParams                                       // 0 not started, 1 waiting, 2 done; the peer waited on
};
enum Status { kDone = 0, kLate = 1, kMismatch = 2 };
constexpr int kLineWords = 16;
constexpr int kTableEntries = 256;
constexpr int kEntryWords = 8;

void Throw(Isolate* iso, const std::string& msg) {
  iso->ThrowException(Exception::Error(String::NewFromUtf8(iso, msg.c_str()).ToLocalChecked()));
}

double NowUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// float16/bfloat16 words as @ddp/half decodes and encodes them (NaN decodes to the canonical
// quiet NaN, as JavaScript's NaN stored into a Float32Array; encoding rounds to nearest even).
float Bits(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
uint32_t BitsOf(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }

float HalfToFloat(uint16_t h) {
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exp == 0) return sign * static_cast<float>(mant) * 0x1p-24f;
  if (exp == 0x1f) return mant == 0 ? sign * INFINITY : Bits(0x7fc00000);
  return Bits((static_cast<uint32_t>(h & 0x8000) << 16) | ((exp + 112) << 23) | (mant << 13));
}

uint16_t FloatToHalf(float v) {
  uint32_t f = BitsOf(v);
  uint32_t sign = (f >> 16) & 0x8000, exp = (f >> 23) & 0xff, mant = f & 0x7fffff;
  if (exp == 0xff) return mant == 0 ? sign | 0x7c00 : sign | 0x7e00 | (mant >> 13);
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    uint32_t sig = mant | 0x800000, shift = 14 - e;
    uint32_t half = sig >> shift, rest = sig & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1))) half++;
    return sign | half;
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13), rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) half++;
  return static_cast<uint16_t>(sign | half);
}

float BfloatToFloat(uint16_t h) { return Bits(static_cast<uint32_t>(h) << 16); }

uint16_t FloatToBfloat(float v) {
  uint32_t f = BitsOf(v);
  if ((f & 0x7f800000) == 0x7f800000 && (f & 0x7fffff) != 0) return ((f >> 16) | 0x40) & 0xffff;
  return ((f + 0x7fff + ((f >> 16) & 1)) >> 16) & 0xffff;
}

float Combine(float a, float b, int op) {
  switch (op) {
    case 1: return a * b;
    case 2: return (a > b || a != a) ? a : b;
    case 3: return (a < b || a != a) ? a : b;
    default: return a + b;
  }
}

// 16-bit words: every input widened and reduced in rank order in float32, AVG divided (an
// overflowed sum of finite inputs redone as Σ x_r / N), rounded once (algorithms/half.ts).
void ReduceHalves(uint16_t* out, const uint16_t* const* in, int n, size_t len, int op, bool bf) {
  auto widen = bf ? BfloatToFloat : HalfToFloat;
  auto narrow = bf ? FloatToBfloat : FloatToHalf;
  for (size_t i = 0; i < len; i++) {
    float acc = widen(in[0][i]);
    for (int r = 1; r < n; r++) acc = Combine(acc, widen(in[r][i]), op);
    if (op == 4) {
      float q = acc / static_cast<float>(n);
      if (std::isinf(q)) {
        float avg = 0;
        bool finite = true;
        for (int r = 0; r < n && finite; r++) {
          float x = widen(in[r][i]);
          finite = std::isfinite(x);
          avg = avg + x / static_cast<float>(n);
        }
        if (finite) q = avg;
      }
      acc = q;
    }
    out[i] = narrow(acc);
  }
}

// float32/float64/int32: chunk c of the output is rank c's chunk reduced with every other
// rank's in rank order (chunkBounds of algorithms/partition.ts), then AVG's division.
template <typename T>
void ReduceChunks(T* out, const T* const* in, int n, size_t len, int op) {
  size_t base = len / n, extra = len % n, start = 0;
  int code = op == 4 ? 0 : op;
  for (int c = 0; c < n; c++) {
    size_t size = base + (static_cast<size_t>(c) < extra ? 1 : 0);
    std::memcpy(out + start, in[c] + start, size * sizeof(T));
    for (int r = 0; r < n; r++) {
      if (r == c) continue;
      if constexpr (std::is_same_v<T, int32_t>) ReduceInt32(out + start, out + start, in[r] + start, size, code);
      else ReduceFloat(out + start, out + start, in[r] + start, size, code);
    }
    start += size;
  }
  if (op != 4) return;
  if constexpr (std::is_same_v<T, int32_t>) {
    for (size_t i = 0; i < len; i++) out[i] = static_cast<int32_t>(std::trunc(static_cast<double>(out[i]) / n));
  } else if (!DivideFloat(out, len, static_cast<T>(n))) {
    // an overflowed sum of finite inputs: Σ (x_r / N) in rank order (reduce.ts's finishAverage)
    for (size_t i = 0; i < len; i++) {
      if (!std::isinf(out[i])) continue;
      T avg = 0;
      bool finite = true;
      for (int r = 0; r < n && finite; r++) {
        finite = std::isfinite(in[r][i]);
        avg = avg + in[r][i] / static_cast<T>(n);
      }
      if (finite) out[i] = avg;
    }
  }
}

int32_t Load(const int32_t* w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }

// Whether peer r has published this op: 1 yes, 0 not yet, -1 it called something else.
int Arrived(const int32_t* words, const int32_t* p, int r) {
  const int32_t* e = words + p[kTable] + (r * kTableEntries + p[kSeq] % kTableEntries) * kEntryWords;
  int32_t seq = Load(e);
  if (seq < p[kSeq]) return 0;
  if (seq > p[kSeq]) return -1;
  for (int k = 1; k <= 5; k++)
    if (__atomic_load_n(e + k, __ATOMIC_RELAXED) != p[kFpOp + k - 1]) return -1;
  if (Load(e) != seq) return -1;
  return Load(words + p[kProgress] + r * kLineWords) >= p[kGen] ? 1 : 0;
}

size_t ElementBytes(int dtype) { return dtype == 1 ? 8 : dtype >= 3 ? 2 : 4; }

bool TypeMatches(Local<Value> v, int dtype) {
  switch (dtype) {
    case 0: return v->IsFloat32Array();
    case 1: return v->IsFloat64Array();
    case 2: return v->IsInt32Array();
    default: return v->IsUint16Array();
  }
}

// exchange(sab, params, data): DONE (0) with the result in data, LATE (1) when the spin
// budget ran out waiting on params[kPeer] (call again to go on), MISMATCH (2) when that peer
// published another collective at this sequence number.
void Exchange(const FunctionCallbackInfo<Value>& args) {
  Isolate* iso = args.GetIsolate();
  if (!args[0]->IsSharedArrayBuffer() || !args[1]->IsInt32Array() || !args[2]->IsTypedArray())
    return Throw(iso, "exchange(sab, params: Int32Array, data)");
  Local<SharedArrayBuffer> sab = args[0].As<SharedArrayBuffer>();
  Local<Int32Array> pa = args[1].As<Int32Array>();
  Local<TypedArray> data = args[2].As<TypedArray>();
  if (pa->Length() < kParams) return Throw(iso, "exchange: params too short");
  auto* p = reinterpret_cast<int32_t*>(static_cast<char*>(pa->Buffer()->Data()) + pa->ByteOffset());
  auto* words = static_cast<int32_t*>(sab->Data());
  size_t total = sab->ByteLength(), nWords = total / 4;
  int n = p[kSize], me = p[kRank], dtype = p[kDtype], op = p[kOp];
  size_t bytes = data->ByteLength(), slotBytes = static_cast<size_t>(p[kSlotBytes]);
  bool fits = n >= 1 && n <= 64 && me >= 0 && me < n && dtype >= 0 && dtype <= 4 && op >= 0 && op <= 4 && p[kBells] >= 0 &&
              p[kProgress] >= 0 && p[kTable] >= 0 && p[kSlots] >= 0 && p[kSlotBytes] > 0 &&
              static_cast<size_t>(p[kBells] + n * kLineWords) <= nWords &&
              static_cast<size_t>(p[kProgress] + n * kLineWords) <= nWords &&
              static_cast<size_t>(p[kTable]) + static_cast<size_t>(n) * kTableEntries * kEntryWords <= nWords &&
              static_cast<size_t>(p[kSlots]) + static_cast<size_t>(n) * slotBytes <= total && bytes <= slotBytes &&
              p[kSlots] % 8 == 0 && slotBytes % 8 == 0 && TypeMatches(data, dtype);
  if (!fits) return Throw(iso, "exchange: params do not fit the segment, or data's type or size do not fit them");
  char* slots = static_cast<char*>(sab->Data()) + p[kSlots];
  char* out = static_cast<char*>(data->Buffer()->Data()) + data->ByteOffset();
  if (p[kPhase] == 2) return args.GetReturnValue().Set(kDone);
  if (p[kPhase] == 0) {
    // this rank's fingerprint for the op, as the lane's record() writes it: the fields, then the seq
    int32_t* e = words + p[kTable] + (me * kTableEntries + p[kSeq] % kTableEntries) * kEntryWords;
    for (int k = 1; k <= 5; k++) __atomic_store_n(e + k, p[kFpOp + k - 1], __ATOMIC_RELAXED);
    __atomic_store_n(e, p[kSeq], __ATOMIC_SEQ_CST);
    std::memcpy(slots + me * slotBytes, out, bytes);
    __atomic_store_n(words + p[kProgress] + me * kLineWords, p[kGen], __ATOMIC_SEQ_CST);
    int32_t* bell = words + p[kBells] + me * kLineWords;
    __atomic_fetch_add(bell, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(bell + 1, __ATOMIC_SEQ_CST) > 0) syscall(SYS_futex, bell, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
    p[kPhase] = 1;
    p[kPeer] = me;
  }
  double end = -1;
  for (int k = 1; k < n; k++) {
    int r = (me + k) % n;
    for (;;) {
      int a = Arrived(words, p, r);
      if (a < 0) {
        p[kPeer] = r;
        return args.GetReturnValue().Set(kMismatch);
      }
      if (a > 0) break;
      if (end < 0) end = NowUs() + p[kSpinUs];
      if (NowUs() >= end) {
        p[kPeer] = r;
        return args.GetReturnValue().Set(kLate);
      }
      // yield rather than pause: on a busy or oversubscribed host the peer may need this core
      // (a pure spin measured 1.1 ms per 4 KiB op on 2 loaded cores, yielding 23 µs)
      sched_yield();
    }
  }
  const void* in[64];
  for (int r = 0; r < n; r++) in[r] = slots + r * slotBytes;
  size_t len = bytes / ElementBytes(dtype);
  switch (dtype) {
    case 0: ReduceChunks(reinterpret_cast<float*>(out), reinterpret_cast<const float* const*>(in), n, len, op); break;
    case 1: ReduceChunks(reinterpret_cast<double*>(out), reinterpret_cast<const double* const*>(in), n, len, op); break;
    case 2: ReduceChunks(reinterpret_cast<int32_t*>(out), reinterpret_cast<const int32_t* const*>(in), n, len, op); break;
    default:
      ReduceHalves(reinterpret_cast<uint16_t*>(out), reinterpret_cast<const uint16_t* const*>(in), n, len, op, dtype == 4);
  }
  p[kPhase] = 2;
  args.GetReturnValue().Set(kDone);
}

}  // namespace

void RegisterExchange(Local<Object> exports, Local<Context> context) {
  Isolate* iso = context->GetIsolate();
  exports->Set(context, String::NewFromUtf8(iso, "exchange").ToLocalChecked(),
               FunctionTemplate::New(iso, Exchange)->GetFunction(context).ToLocalChecked()).Check();
}
