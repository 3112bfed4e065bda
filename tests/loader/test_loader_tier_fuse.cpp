// FUSE classification needs a FUSE filesystem (a later issue brings one):
// this suite skips visibly (exit 77) until then.
#include <cstdio>

int main() {
  std::puts("SKIP: no FUSE test filesystem yet (comes with the FUSE issue)");
  return 77;
}
