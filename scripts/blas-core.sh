#!/usr/bin/env bash
# Prints the OpenBLAS core that pelab runs its BLAS calls on, on this CPU (after pelab's own
# check of OpenBLAS's choice: src/kernels/cpu/blas_kernels.h), or nothing without OpenBLAS.
# The tests and benchmarks export it as OPENBLAS_CORETYPE, so that every program they run (the C
# tests, the PyTorch twin) uses the kernels pelab uses, and pelab itself says nothing about them.
#   scripts/blas-core.sh [PELAB_BINARY]      (default ./pelab)
"${1:-./pelab}" --version 2>/dev/null | sed -n 's/^BLAS: OpenBLAS [^ ]* \([^ ]*\) kernels.*/\1/p'
