//! Gives the shared library the soname it is installed under.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libshmlink.so.2");
}
