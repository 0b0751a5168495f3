"""The "Data Tables" page inside the Airflow UI (an Airflow plugin served by the api-server).

:mod:`.plugin` is what every Airflow component imports (cheap: no FastAPI app, no hook);
:mod:`.app` builds the FastAPI app on the api-server's first request; :mod:`.overview`,
:mod:`.events` and :mod:`.connections` gather what the page shows; :mod:`.cache` shares
each department's listing between all viewers.
"""
