"""Tools around the pipeline, not part of it: `simulator` writes a simulated fleet's landing zone
(`quorumlake generate`, `demo`), `collect` polls real clusters into one (`quorumlake collect`), and `report` renders
the gold tables as one HTML page (`quorumlake report`). None of them imports `pipelines`: the CLI's handlers
(`pipelines.commands`) call them."""
