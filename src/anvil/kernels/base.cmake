# Shared by every kernel family: the kernel context.
target_sources(anvil_kernels PRIVATE ${CMAKE_CURRENT_LIST_DIR}/ctx.cc)
