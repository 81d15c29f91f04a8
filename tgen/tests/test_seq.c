#include "harness.h"
int main(void){ return DONE(); }
