{
  "targets": [
    {
      "target_name": "ddp_mpi",
      "sources": ["src/mpi.cc", "src/execute.cc"],
      "defines": ["OMPI_SKIP_MPICXX", "MPICH_SKIP_MPICXX"],
      "cflags_cc": ["-O2", "-std=c++17", "<!@(mpicc --showme:compile)"],
      "libraries": ["<!@(mpicc --showme:link)"]
    }
  ]
}
