"""Recording a run and replaying it strictly, over real sockets (mirrors proxy/recording/)."""
