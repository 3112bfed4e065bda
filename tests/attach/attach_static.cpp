// A statically linked program: `stallscope run` must refuse it clearly.
int main() { return 0; }
