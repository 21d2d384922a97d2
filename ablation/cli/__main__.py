from ablation.cli import main

main()
