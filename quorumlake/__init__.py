"""quorumlake: a Delta Lake medallion lakehouse for KRaft quorum and partition-replication health across a Kafka fleet.

Sub-packages: `contract` (every table's definition, Kafka's constants), `bronze`, `silver`, `gold` (pure
DataFrame -> DataFrame builders), `expectations` (the data-quality suites), `pipelines` (the command line, the jobs,
storage, the Spark engine, serving), `simulator` (a simulated fleet's landing zone), `collector` (polls real clusters
into one) and `report` (the HTML page over gold).
"""
