# Parity with the fixtures' reference outputs (label `parity`), through the
# conformance runner: simple-cnn against PyTorch (batch 1 and 7) and every
# marian-tiny graph against ONNX Runtime. fp32: max abs error 1e-5; int8
# graphs: integer outputs exact (the runner compares integers exactly) and
# float outputs within 1e-4.
set(TOLK_FIX ${CMAKE_CURRENT_SOURCE_DIR}/fixtures)

if(EXISTS ${TOLK_FIX}/simple-cnn/model.onnx)
  add_test(NAME parity_simple_cnn
           COMMAND conformance --verbose --atol 1e-5 --rtol 0 ${TOLK_FIX}/simple-cnn)
  set_tests_properties(parity_simple_cnn PROPERTIES LABELS parity)
endif()

foreach(graph encoder_model decoder_model decoder_with_past_model decoder_model_merged)
  foreach(variant "" _quantized)
    set(g ${graph}${variant})
    if(EXISTS ${TOLK_FIX}/marian-tiny/${g}.onnx AND EXISTS ${TOLK_FIX}/golden/marian-tiny/${g})
      if(variant STREQUAL "")
        set(tol 1e-5)
      else()
        set(tol 1e-4)
      endif()
      add_test(NAME parity_marian_${g}
               COMMAND conformance --verbose --atol ${tol} --rtol 0
                       --model ${TOLK_FIX}/marian-tiny/${g}.onnx ${TOLK_FIX}/golden/marian-tiny/${g})
      set_tests_properties(parity_marian_${g} PROPERTIES LABELS parity)
    endif()
  endforeach()
endforeach()
