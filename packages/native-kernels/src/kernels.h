#pragma once
#include <node_api.h>

napi_value BatchMatMul(napi_env env, napi_callback_info info);
napi_value Conv2D(napi_env env, napi_callback_info info);
napi_value Conv2DBackpropInput(napi_env env, napi_callback_info info);
napi_value Conv2DBackpropFilter(napi_env env, napi_callback_info info);
napi_value Sum(napi_env env, napi_callback_info info);

// row-major C[m, n] = alpha·op(A)·op(B) + beta·C with the leading dimensions of dense matrices
void sgemm(bool transA, bool transB, int m, int n, int k, const float* a, const float* b, float beta, float* c);
