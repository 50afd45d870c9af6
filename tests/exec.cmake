# Execution engine tests needing more than the default registration.
# The RSS check measures the allocator's steady state, which AddressSanitizer's
# quarantine of freed memory hides: it runs in the plain builds only.
if(TEST test_exec_rss)
  set_tests_properties(test_exec_rss PROPERTIES LABELS "unit;nosan")
endif()
# Peak resident sizes: the sanitizers' shadow memory would decide them.
if(TEST test_exec_load_peak)
  set_tests_properties(test_exec_load_peak PROPERTIES LABELS "unit;nosan")
endif()
