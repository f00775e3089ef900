#include "left/left.h"

#include <vector>

#include "right/right.h"

int Left() { return Base() + Right(); }
