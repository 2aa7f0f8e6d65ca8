{
  "targets": [
    {
      "target_name": "ddp_kernels",
      "sources": ["src/addon.cc", "src/heap.cc", "src/gemm.cc", "src/conv.cc"],
      "cflags_cc": ["-O3", "-std=c++17"],
      "libraries": ["-lopenblas"]
    }
  ]
}
