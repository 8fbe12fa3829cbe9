print("securepush")
