{
  "targets": [
    {
      "target_name": "ddp_shm",
      "sources": ["src/shm.cc", "src/alias.cc", "src/exchange.cc", "src/pending-work.cc"],
      "cflags_cc": ["-O3", "-std=c++17"],
      "libraries": ["-lrt"]
    }
  ]
}
