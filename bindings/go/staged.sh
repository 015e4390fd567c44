# Sourced by test.sh and bench.sh with $repo set to the repository root:
# makes Go rebuild the binding whenever the staged C library changes. Go's
# build cache does not look at C headers or libraries outside the package,
# so a rebuilt target/stage would otherwise be linked against code compiled
# from the old header (seen: options read at the old struct layout). The
# hash of both goes into CGO_CFLAGS, which is part of every cgo action's key.
staged_hash=$(cat "$repo/target/stage/include/shmlink.h" "$repo/target/stage/lib/libshmlink.a" | sha256sum | cut -c1-16)
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -DSHMLINK_STAGED=$staged_hash"
