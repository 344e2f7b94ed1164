"""The agent loop's implementation: the ``agent`` facade re-exports its public names.

Apart from it, and never importing it, sit the tools that only read stores (``agent.cli``,
``agent.web``, ``agent.report``, ``agent.otel``) and the framework integrations
(``agent.integrations``); ``agent.models`` holds the provider adapters the loop calls.
"""
