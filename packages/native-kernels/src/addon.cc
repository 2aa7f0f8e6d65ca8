// The module's exports: the kernels (gemm.cc, conv.cc + conv-dnnl.cc, reduce.cc, tile.cc, adam.cc, fused.cc, exp.cc, channel.cc, round-half.cc) and the BLAS thread count.
#include <cblas.h>
#include <omp.h>
#include "heap.h"
#include "kernels.h"
#include "signal-guard.h"

namespace {

// setThreads(n): OpenBLAS's threads and oneDNN's (OpenMP, for calls from this thread); returns OpenBLAS's count.
napi_value SetThreads(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  int32_t n = 0;
  if (argc < 1 || napi_get_value_int32(env, argv[0], &n) != napi_ok || n < 1) return throwRange(env, "setThreads: n must be ≥ 1");
  openblas_set_num_threads(n);
  omp_set_num_threads(n);
  {
    // OpenMP's threads, made now, inherit this mask for good: oneDNN's kernels run on them too
    AsyncSignalsBlocked quiet;
#pragma omp parallel num_threads(n)
    { (void)omp_get_thread_num(); }
  }
  napi_value result;
  napi_create_int32(env, openblas_get_num_threads(), &result);
  return result;
}

// library(): OpenBLAS's build description, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64".
napi_value Library(napi_env env, napi_callback_info) {
  napi_value result;
  napi_create_string_utf8(env, openblas_get_config(), NAPI_AUTO_LENGTH, &result);
  return result;
}

// blasCore(): the kernel set OpenBLAS chose for this CPU at load (e.g. "SkylakeX", or "Prescott" when it fell back).
napi_value BlasCore(napi_env env, napi_callback_info) {
  napi_value result;
  napi_create_string_utf8(env, openblas_get_corename(), NAPI_AUTO_LENGTH, &result);
  return result;
}

napi_value Init(napi_env env, napi_value exports) {
  const napi_property_descriptor props[] = {
      {"BatchMatMul", nullptr, BatchMatMul, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"Conv2D", nullptr, Conv2D, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"Conv2DBackpropInput", nullptr, Conv2DBackpropInput, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"Conv2DBackpropFilter", nullptr, Conv2DBackpropFilter, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"ConvForward", nullptr, ConvForward, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"ConvBackward", nullptr, ConvBackward, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"Sum", nullptr, Sum, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"AdamStep", nullptr, AdamStep, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"Tile", nullptr, Tile, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"LayerNorm", nullptr, LayerNorm, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"LayerNormGrad", nullptr, LayerNormGrad, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"Gelu", nullptr, Gelu, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"GeluGrad", nullptr, GeluGrad, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"ReluGrad", nullptr, ReluGrad, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"Softmax", nullptr, Softmax, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"SoftmaxGrad", nullptr, SoftmaxGrad, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"BiasAdd", nullptr, BiasAdd, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"ChannelSum", nullptr, ChannelSum, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"Exp", nullptr, Exp, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"RoundToHalf", nullptr, RoundToHalf, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"setThreads", nullptr, SetThreads, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"blasCore", nullptr, BlasCore, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"library", nullptr, Library, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
