from ccl_bench._cli import main

main()
