# What the PHP scripts need built (sourced, bash; from the repository root,
# with a `step` function): sets $module to the PHP extension, building it
# (ci/php-build.sh --no-valgrind) and the CLI (target/release/shmlink) when
# they are missing.
module="$PWD/bindings/php/modules/shmlink.so"
if [ ! -f "$module" ]; then
  step "build the extension (ci/php-build.sh --no-valgrind)"
  ci/php-build.sh --no-valgrind
fi
if [ ! -x target/release/shmlink ]; then
  step "build the CLI"
  cargo build --release -p shmlink-cli
fi
