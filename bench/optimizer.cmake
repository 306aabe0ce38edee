# Optimizer benchmark (plain main, std::chrono); included from bench/CMakeLists.txt.
# Run: build/bin/optimizer_bench [PROFILE.csv]
add_executable(optimizer_bench ${CMAKE_CURRENT_LIST_DIR}/optimizer_bench.cc)
target_link_libraries(optimizer_bench PRIVATE packrat_planning)
target_compile_definitions(optimizer_bench PRIVATE
  PACKRAT_PROFILES_DIR="${CMAKE_SOURCE_DIR}/data/profiles")
