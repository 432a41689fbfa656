print("kc-secretd")
