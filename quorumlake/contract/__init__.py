"""The lakehouse's data contract in code: the table registry (`quorumlake.contract.tables`) and the Kafka constants
every reader of Kafka's surfaces shares (`quorumlake.contract.kafka`).

It sits below every layer: `bronze`, `silver` and `gold` build their outputs from the registry's columns, and
`pipelines` creates, registers and checks the tables from it. It imports nothing of the project.
"""
