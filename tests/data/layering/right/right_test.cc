#include "right/right.h"

int main() { return Right() == 2 ? 0 : 1; }
