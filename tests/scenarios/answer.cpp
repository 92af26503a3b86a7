// A real extension for tests/scenarios/stalls.py's `lock`: cpp_extension.load("x", sources=[this])
// builds it into x.so and imports it as the module x; x.answer() returns 42.
#include <Python.h>

static PyObject *answer(PyObject *, PyObject *) { return PyLong_FromLong(42); }

static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, "42"}, {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "x", nullptr, -1, methods};

PyMODINIT_FUNC PyInit_x(void) { return PyModule_Create(&module); }
