# Kernel tests beyond the default registration (owner: kernels).
#
# test_kern_sgemm runs every ISA this CPU has; kern_sgemm_isa_env runs it
# again with TOLK_ISA=scalar to check that the override decides the initial
# choice. (bench/gemm.c is built as bench_gemm by bench/CMakeLists.txt.)
if(TARGET test_kern_sgemm)
  add_test(NAME kern_sgemm_isa_env COMMAND test_kern_sgemm)
  set_tests_properties(kern_sgemm_isa_env PROPERTIES LABELS unit ENVIRONMENT "TOLK_ISA=scalar")
endif()
