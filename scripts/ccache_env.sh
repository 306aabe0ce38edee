# Sourced (not run) by setup.sh, test.sh and fuzz.sh from the repository root: how ccache keys
# Packrat's objects, so that every build of the same sources shares them wherever the checkout
# lies (CI's fresh clone in /tmp, the image's build stage in /src, a developer's tree).
#
# - BASEDIR: paths under the checkout are hashed relative to it.
# - NOHASHDIR: the build folder's absolute path stays out of the key of objects with debug
#   information (the sanitizer builds' -g1); their DW_AT_comp_dir names whichever checkout
#   built them first, which changes no stack trace.
# - IGNOREHEADERS: the kernel's userspace headers (linux-libc-dev, updated with every kernel
#   security update and so often newer in the image than on a machine installed earlier) stay
#   out of ccache's manifests: they never change what existing code means. The Dockerfile sets
#   the same.
export CCACHE_BASEDIR=$PWD
export CCACHE_NOHASHDIR=true
export CCACHE_IGNOREHEADERS=/usr/include/linux:/usr/include/asm-generic:/usr/include/x86_64-linux-gnu/asm:/usr/include/misc:/usr/include/mtd:/usr/include/rdma:/usr/include/sound:/usr/include/video:/usr/include/xen
