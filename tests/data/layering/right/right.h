#pragma once
#include "base/base.h"
inline int Right() { return Base() + 1; }
