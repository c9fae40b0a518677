// A C++ program whose allocations come from a namespace, a class and a
// template, for the test that stacks are symbolized with demangled names:
// shapes::make_many<shapes::Widget>(int) allocates 40 widgets with `new`,
// each constructor a std::vector of parts.
#include <memory>
#include <vector>

namespace shapes {

struct Widget {
    std::vector<int> parts;
    explicit Widget(int n) : parts(static_cast<size_t>(n)) {}
};

template <typename T>
__attribute__((noinline)) std::vector<std::unique_ptr<T>> make_many(int n) {
    std::vector<std::unique_ptr<T>> out;
    out.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; i++)
        out.push_back(std::make_unique<T>(8 + i));
    return out;
}

}  // namespace shapes

int main() {
    auto widgets = shapes::make_many<shapes::Widget>(40);
    return widgets.size() == 40 ? 0 : 1;
}
