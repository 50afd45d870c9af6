# Kernel tests beyond the default registration (owner: kernels).
#
# test_kern_sgemm runs every ISA this CPU has; kern_sgemm_isa_env runs it
# again with TOLK_ISA=scalar to check that the override decides the initial
# choice. (bench/gemm.c is built as bench_gemm by bench/CMakeLists.txt.)
if(TARGET test_kern_sgemm)
  add_test(NAME kern_sgemm_isa_env COMMAND test_kern_sgemm)
  set_tests_properties(kern_sgemm_isa_env PROPERTIES LABELS unit ENVIRONMENT "TOLK_ISA=scalar")
endif()

# The avxvnni tier's code with vpdpbusd emulated in AVX2 (see
# kern_igemm_avxvnni_emu.c): this build's igemm.c and igemm_avxvnni.c come
# before the library's on the link line, so the library's copies of both
# are not pulled in.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|i.86")
  add_executable(test_kern_igemm_avxvnni_emu test_kern_igemm.c kern_igemm_avxvnni_emu.c
                 ${PROJECT_SOURCE_DIR}/src/kern/igemm.c)
  target_compile_definitions(test_kern_igemm_avxvnni_emu PRIVATE KERN_EMULATE_AVXVNNI)
  target_compile_options(test_kern_igemm_avxvnni_emu PRIVATE ${TOLK_WARNINGS})
  set_source_files_properties(kern_igemm_avxvnni_emu.c PROPERTIES COMPILE_OPTIONS "-mavx2")
  target_include_directories(test_kern_igemm_avxvnni_emu PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(test_kern_igemm_avxvnni_emu PRIVATE tolk_static)
  add_test(NAME test_kern_igemm_avxvnni_emu COMMAND test_kern_igemm_avxvnni_emu avxvnni)
  set_tests_properties(test_kern_igemm_avxvnni_emu PROPERTIES LABELS unit)
endif()

# The amx tier's code with its tile instructions done in C (see
# kern_igemm_amx_emu.c), linked the same way; it needs AVX-512 VNNI, which
# every AMX CPU has, and says so where the CPU lacks it.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|i.86" AND TOLK_CC_AVX512VNNI)
  add_executable(test_kern_igemm_amx_emu test_kern_igemm.c kern_igemm_amx_emu.c
                 ${PROJECT_SOURCE_DIR}/src/kern/igemm.c)
  target_compile_definitions(test_kern_igemm_amx_emu PRIVATE KERN_EMULATE_AMX)
  target_compile_options(test_kern_igemm_amx_emu PRIVATE ${TOLK_WARNINGS})
  set_source_files_properties(kern_igemm_amx_emu.c PROPERTIES COMPILE_OPTIONS
    "-mavx512f;-mavx512bw;-mavx512vnni;-mavx2")
  target_include_directories(test_kern_igemm_amx_emu PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(test_kern_igemm_amx_emu PRIVATE tolk_static)
  add_test(NAME test_kern_igemm_amx_emu COMMAND test_kern_igemm_amx_emu amx)
  set_tests_properties(test_kern_igemm_amx_emu PROPERTIES LABELS unit)
endif()
