# Refuses every flavor but "plain".
if(NOT LABKIT_TEST_FLAVOR STREQUAL "plain")
  message(FATAL_ERROR "LABKIT_TEST_FLAVOR is ${LABKIT_TEST_FLAVOR}; only plain configures")
endif()
