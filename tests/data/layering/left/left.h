#pragma once
#include "base/base.h"
int Left();
