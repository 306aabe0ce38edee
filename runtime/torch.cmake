# libtorch for the targets that include torch headers (runtime/ and tests/runtime/): sets
# TORCH_LIBRARIES, TORCH_INCLUDE_DIRS and TORCH_CXX_FLAGS.
#
# By default Debian's libtorch-dev through its TorchConfig. With PACKRAT_TORCH_ROOT, the `torch`
# folder of a pip-installed PyTorch (a benchmark machine without Debian's packages:
# bench/device.sh), only its CPU libraries are linked, without TorchConfig's CUDA discovery. The
# wheel must use the C++11 string ABI, as every other library of the build does
# (bench/device.sh checks torch._C._GLIBCXX_USE_CXX11_ABI).
set(PACKRAT_TORCH_ROOT "" CACHE PATH "a pip-installed torch package folder (CPU libraries only)")
if(PACKRAT_TORCH_ROOT)
  set(TORCH_INCLUDE_DIRS ${PACKRAT_TORCH_ROOT}/include
                         ${PACKRAT_TORCH_ROOT}/include/torch/csrc/api/include)
  if(NOT TARGET packrat_pip_torch)
    find_library(PACKRAT_TORCH_CPU_LIBRARY torch_cpu PATHS ${PACKRAT_TORCH_ROOT}/lib
                 NO_DEFAULT_PATH REQUIRED)
    find_library(PACKRAT_C10_LIBRARY c10 PATHS ${PACKRAT_TORCH_ROOT}/lib NO_DEFAULT_PATH REQUIRED)
    add_library(packrat_pip_torch INTERFACE IMPORTED GLOBAL)
    target_include_directories(packrat_pip_torch INTERFACE ${TORCH_INCLUDE_DIRS})
    target_link_libraries(packrat_pip_torch INTERFACE ${PACKRAT_TORCH_CPU_LIBRARY}
                          ${PACKRAT_C10_LIBRARY})
  endif()
  set(TORCH_LIBRARIES packrat_pip_torch)
  set(TORCH_CXX_FLAGS "")
else()
  find_package(Torch REQUIRED)
endif()
