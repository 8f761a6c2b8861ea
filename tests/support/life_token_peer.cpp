// The other process of life_token_test: takes a life token, prints its
// name, and then does what its stdin says: "end" lets the token go in order
// and exits; end of input exits without letting it go (the token reads dead,
// as after a crash). Killed or stopped by the test meanwhile.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "actors/process/life_token.hpp"

int main() {
  auto token = kvferry::life_token::take();
  if (!token) {
    std::cout << "no token" << std::endl;
    return 1;
  }
  std::cout << "token " << token->where().name << std::endl;
  std::string cmd;
  if (std::getline(std::cin, cmd) && cmd == "end") {
    token->end();
    std::cout << "ended" << std::endl;
    return 0;
  }
  ::_exit(3);  // no destructors: the token is never let go
}
