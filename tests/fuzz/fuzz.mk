# make fuzz / make test-asan: filled in by the robustness work (issue 5).
.PHONY: fuzz test-asan
